"""The state store's tables (SQLAlchemy Core). Bump SCHEMA_VERSION with every change of shape."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    text,
)

CHUNK = 1000  # ids per statement: well inside SQLite's and PostgreSQL's limits on parameters

SCHEMA_VERSION = 9  # 2: one running or paused job per feed (one_active_job_per_feed); 3: spans owned by nodes;
# 4: a span's home and what moved it last; 5: a batch's schema changes; 6: a node's session lock; 7: a node's
# views of its feeds; 8: those views kept apart from the node's registration, each with when the node got it;
# 9: a job's contract version, and one running or paused job per feed and version

metadata = MetaData()

meta = Table(
    "feedctl_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

nodes = Table(
    "nodes",
    metadata,
    Column("node_id", String(128), primary_key=True),
    Column("locality", Text, nullable=False, default=""),
    Column("host", Text, nullable=False, default=""),
    Column("pid", Integer, nullable=False, default=0),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("feeds", Text, nullable=False, default="[]"),  # JSON: the feeds whose spans it works (--follow)
    Column("lock_session", Text),  # PostgreSQL: the server start its session lock is held under (session_lock)
)

# What each node's copy of the project says of each feed it runs (`job/rollout.py`), kept while the node
# restarts: `since`, the store's sequence number (`state/sequence.py`) when the node loaded the copy that first
# said it.
node_views = Table(
    "node_views",
    metadata,
    Column("node_id", String(128), nullable=False),
    Column("feed", String(256), nullable=False),
    Column("view", String(64), nullable=False),
    Column("since", BigInteger, nullable=False),
    PrimaryKeyConstraint("node_id", "feed"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", BigInteger, primary_key=True, autoincrement=False),
    Column("feed", String(256), nullable=False, index=True),
    Column("version", Integer, nullable=False, default=1),  # the feed's contract version it emits (`version:`)
    Column("status", String(32), nullable=False),  # running | paused | failed | succeeded | canceled
    Column("definition_hash", String(80), nullable=False),
    Column("definition", Text, nullable=False),  # the manifest's entry for the feed, secrets redacted
    Column("sink_uri", Text, nullable=False, default=""),  # redacted
    Column("created_at", Float, nullable=False),
    Column("modified_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("start_wall", BigInteger, nullable=False),  # the statement time: initial scan and cursor
    Column("start_logical", Integer, nullable=False, default=0),
    Column("high_water_wall", BigInteger, nullable=False, default=0),
    Column("high_water_logical", Integer, nullable=False, default=0),
    Column("resolved_wall", BigInteger, nullable=False, default=0),  # last resolved timestamp emitted
    Column("resolved_logical", Integer, nullable=False, default=0),
    Column("resolved_at", Float),
    Column("checkpoint_at", Float),
    Column("running_status", Text, nullable=False, default=""),
    Column("error", Text, nullable=False, default=""),
    Column("coordinator", String(128)),
    Column("lease_expires_at", Float),
    Column("lease_epoch", Integer, nullable=False, default=0),
    Column("initial_scan_done", Integer, nullable=False, default=0),
)

# Nodes starting together never create two jobs of one feed's version: the second insert fails. A feed's
# versions run side by side, each into a location of its own (`sinks/versioned.py`).
ACTIVE_WHERE = "status IN ('running', 'paused')"
one_active_job_per_version = Index(
    "one_active_job_per_version",
    jobs.c.feed,
    jobs.c.version,
    unique=True,
    sqlite_where=text(ACTIVE_WHERE),
    postgresql_where=text(ACTIVE_WHERE),
)

table_positions = Table(
    "table_positions",
    metadata,
    Column("job_id", BigInteger, nullable=False),
    Column("table_name", String(256), nullable=False),
    Column("version", BigInteger, nullable=False),  # last Delta version fully emitted; -1 before any
    Column("spans", Integer, nullable=False),
    PrimaryKeyConstraint("job_id", "table_name"),
)

# Each span of a job: the node that emits it, and how far it has: the last batch whose share it emitted,
# and that batch's target (its frontier).
span_frontiers = Table(
    "span_frontiers",
    metadata,
    Column("job_id", BigInteger, nullable=False),
    Column("table_name", String(256), nullable=False),
    Column("span", Integer, nullable=False),
    Column("wall", BigInteger, nullable=False),
    Column("logical", Integer, nullable=False),
    Column("batch_seq", BigInteger, nullable=False, default=0),
    Column("node_id", String(128)),  # the owner; NULL until placed, or once released
    Column("moving_to", String(128)),  # handed to this node at the owner's next batch boundary
    Column("reason", Text, nullable=False, default=""),  # where it is (or goes): home, closest, balanced, any
    Column("assigned_at", Float),
    Column("home", Text),  # the locality its data lives in (None: anywhere)
    Column("note", Text, nullable=False, default=""),  # what moved it last: its owner not live, a hand-over...
    PrimaryKeyConstraint("job_id", "table_name", "span"),
)

event_ts_log = Table(
    "event_ts_log",
    metadata,
    Column("job_id", BigInteger, nullable=False),
    Column("table_name", String(256), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("commit_wall", BigInteger, nullable=False),
    Column("event_wall", BigInteger, nullable=False),
    Column("event_logical", Integer, nullable=False),
    Column("rows", BigInteger, nullable=False, default=0),  # estimate, from the commit's actions
    Column("bytes", BigInteger, nullable=False, default=0),
    PrimaryKeyConstraint("job_id", "table_name", "version"),
)


class IntentStatus(StrEnum):
    """A batch intent's status, as the store holds it."""

    PENDING = "pending"  # cut, its spans emitting it
    DONE = "done"  # taken into the high-water mark by a checkpoint


batch_intents = Table(
    "batch_intents",
    metadata,
    Column("job_id", BigInteger, nullable=False),
    Column("batch_seq", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),  # IntentStatus
    Column("kind", String(16), nullable=False),  # scan | changes | resolved-only
    Column("target_wall", BigInteger, nullable=False),
    Column("target_logical", Integer, nullable=False),
    Column("ranges", Text, nullable=False),  # JSON: {table: [from_version_exclusive, to_version_inclusive]}
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("result", Text, nullable=False, default=""),  # JSON summary: files, messages, bytes
    # JSON {table: policy}: the tables whose range is one version changing their schema, and what the feed
    # does about it (`options.SchemaChangeAction`)
    Column("schema_changes", Text, nullable=False, default=""),
    PrimaryKeyConstraint("job_id", "batch_seq"),
)
