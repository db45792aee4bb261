"""Opening the state store: SQLite (WAL, safe for several processes on one host) or PostgreSQL."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, insert, inspect, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from feedctl.state import migrations
from feedctl.state.schema import SCHEMA_VERSION, meta, metadata


class StateError(Exception):
    pass


def resolve_url(url: str, project_root: Path) -> str:
    """`sqlite:///target/state.db` is relative to the project; `sqlite:////abs` is absolute."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////") and url != "sqlite:///:memory:":
        path = project_root / url.removeprefix("sqlite:///")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file where the folder belongs, no permission...
            raise StateError(f"cannot make the state store's folder {path.parent}: {exc.strerror}") from None
        return f"sqlite:///{path}"
    return url


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # the driver must not open transactions of its own
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn):
        # Take the write lock at BEGIN: two processes never both read, then both write. A read-only snapshot
        # takes no lock, so `status` and `jobs` answer even while a stopped process holds the write lock.
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(_READING) else "BEGIN IMMEDIATE")


def _postgresql_session(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        # A process stopped inside a transaction (SIGSTOP, a long pause) would hold its row locks, and with
        # them the job's lease, for as long as it stays stopped: the server ends such a session instead. No
        # transaction here waits on anything but the store itself.
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET idle_in_transaction_session_timeout = '10s'")
        dbapi_connection.commit()


_READING = "feedctl_reading"


def _engine(url: str, **pool) -> Engine:
    engine = create_engine(url, future=True, **pool)
    if engine.dialect.name == "sqlite":
        _sqlite_pragmas(engine)
    elif engine.dialect.name == "postgresql":
        _postgresql_session(engine)
    return engine


# What the store failing looks like, to those that retry it: its driver's errors, and no connection to be had.
STORE_ERRORS = (DBAPIError, PoolTimeout)


class StateStore:
    """The engine plus `transaction()`: every state transition is one transaction."""

    def __init__(self, url: str, project_root: Path | str = "."):
        self.url = resolve_url(url, Path(project_root))
        # The pool's bound (15 connections) queues a node's many feeds fairly: unbounded, 500 feeds' threads
        # all waited in SQLite's busy handler, and most timed out. Waiting 30 s for a connection is a store
        # error (`STORE_ERRORS`), tried again. Every connection is kept once made (no overflow): made past a
        # smaller pool and closed as they came back, three nodes of 1,000 feeds opened six PostgreSQL sessions
        # a second, each a server process started and a login.
        self.engine = _engine(self.url, pool_size=15, max_overflow=0)
        # The node's own work for all its feeds (`node=True`) is done on connections of its own. Behind the
        # feeds' steps in the pool, three saturated nodes' heartbeats waited up to 17 s for a connection, past
        # the liveness TTL, and every job's lease changed hands a dozen times in four minutes; with 500 feeds
        # emitting, a third of an emit's time went waiting for a connection, and each emit waits for the
        # node's group commit of its record, the ticker's cut of its batch, and the watch before it.
        self._node = _engine(self.url, pool_size=10, max_overflow=0)
        self._counting = threading.Lock()
        self.begun = {"write": 0, "read": 0}  # transactions begun by this process, for its metrics
        self._migrate()

    @classmethod
    def of_project(cls, project) -> "StateStore":
        """The store named by `state:` in project.yml."""
        return cls(project.state_url, project.root)

    @contextmanager
    def transaction(self, node: bool = False):
        """A write transaction. `node`: the node's own work for all its feeds (its heartbeat, its leases'
        renewal, its watch, its ticker, its feeds' records committed together), which must not wait behind
        its feeds' threads for a connection: each of them waits for that work."""
        self._count("write")
        with (self._node if node else self.engine).begin() as conn:
            yield conn

    @contextmanager
    def reading(self, node: bool = False):
        """A consistent snapshot for commands that only look: on SQLite it waits for no writer. `node`: as
        for `transaction`."""
        self._count("read")
        with (self._node if node else self.engine).connect() as conn:
            conn = conn.execution_options(**{_READING: True})
            with conn.begin():
                yield conn

    def _count(self, kind: str) -> None:
        with self._counting:
            self.begun[kind] += 1

    def _current(self) -> bool:
        with self.reading() as conn:
            return inspect(conn).has_table(meta.name) and conn.execute(
                select(meta.c.value).where(meta.c.key == "schema_version")
            ).scalar() == str(SCHEMA_VERSION)

    def _migrate(self) -> None:
        if self._current():  # the common case takes no write lock
            return
        with self.transaction() as conn:
            if self.engine.dialect.name == "postgresql":  # nodes starting together create the tables once
                conn.execute(text("SELECT pg_advisory_xact_lock(7423001)"))
            found = (
                conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
                if inspect(conn).has_table(meta.name)
                else None
            )
            if found is not None and int(found) > SCHEMA_VERSION:
                raise StateError(
                    f"the state store {self.url} has schema version {found}, newer than this "
                    f"feedctl's {SCHEMA_VERSION}; upgrade feedctl"
                )
            if found is not None:
                migrations.upgrade(conn, int(found))
            metadata.create_all(conn)  # a new store's tables, and those new since `found`
            if conn.execute(select(meta.c.key).where(meta.c.key == "sequence")).first() is None:
                conn.execute(insert(meta).values(key="sequence", value="0"))  # `state/sequence.py`
            if found is None:
                conn.execute(insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
            elif int(found) < SCHEMA_VERSION:
                conn.execute(update(meta).where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))

    def close(self) -> None:
        self.engine.dispose()
        self._node.dispose()
