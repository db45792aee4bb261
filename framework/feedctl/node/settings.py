"""What a node's run of a feed's job is told (`RunSettings`: the command line's and a test's settings) and
what it tells back (`RunReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from feedctl.coordinator.knobs import TestingKnobs
from feedctl.state import nodes
from feedctl.state.jobs import JobStatus
from feedctl.units import Hlc


@dataclass
class RunSettings:
    follow: bool = False
    poll_interval: float = 1.0
    closed_lag: float = 3.0
    lease_ttl: float = 15.0
    liveness_ttl: float = nodes.LIVENESS_TTL  # a node silent this long is dead: its jobs are taken over
    node_id: str | None = None  # None: the host name, or `<host>-<pid>` while a live process uses that
    retries: int = 5  # attempts again of one step, for errors a retry may fix (storage, sinks, Spark)
    retry_backoff: float = 1.0  # the first wait; each failure doubles it until the high-water mark moves
    max_backoff: float = 30.0
    new_job: bool = False  # start a new job for feeds whose newest job is canceled or failed
    cursor: str | None = None  # where the new jobs of this run start (the feed's `cursor`, given here)
    continue_job: bool = False  # new jobs start at their feed's previous job's high-water mark
    rescan: bool = False  # a new job may scan into the folder a previous job of its feed emitted into
    scan_tables: tuple[str, ...] = ()  # tables a new job scans alone at its start, above all emitted before
    locality: str = ""  # this runner's locality tiers, `region=us-east1,zone=a`
    batches_ahead: int = 2  # batches cut ahead of the slowest span: how far other nodes may run ahead of it
    span_grace: float = 0.0  # seconds a dead node keeps its spans, in case it comes back (0: moved at once)
    locality_grace: float | None = None  # how long a job waits for a node matching its execution_locality
    # before it fails (None: two liveness TTLs)
    # A batch of at most this many changes, of a feed without a CDC query, is written by the node itself
    # where Spark's executors would share its disk: less work than a Spark job costs (0: always Spark).
    emit_here_rows: int = 10_000
    workers: int | None = None  # a --follow node's scheduler's workers (None: `scheduler.default_workers`)
    knobs: TestingKnobs = field(default_factory=TestingKnobs)  # hooks a test sets; nothing otherwise


class RunOutcome(StrEnum):
    """How a run ended when it left no job in a status of its own (a string: it compares equal to its value)."""

    ERROR = "error"  # refused, or failed before its job ran: the note says why
    SKIPPED = "skipped"  # a feed without a sink
    STORE_UNAVAILABLE = "store_unavailable"  # the state store failed it: a --follow node runs it again


@dataclass
class RunReport:
    feed: str
    job_id: int | None
    status: JobStatus | RunOutcome  # the job's, as this run left it, or why there is none
    batches: int = 0
    messages: int = 0
    files: int = 0
    high_water: Hlc = Hlc(0)
    resolved: Hlc = Hlc(0)
    note: str = ""
    error: str = ""  # set when this run failed or paused the job
