"""On PostgreSQL, a node's process holds a session advisory lock of its own for as long as it runs. When the
process ends (killed, crashed), on whatever host, that host's kernel closes its connections, the server ends
the session and the lock goes with it: other nodes find the node dead at once instead of after the liveness
TTL, as they do for a node of their own host whose pid no longer runs.

A stopped process still holds its lock, and so seems to a host that vanished without closing its connections:
the TTL decides those. A server that restarts drops every lock, so a node's row names the server start its
lock was taken under (`nodes.lock_session`); a lock of an earlier start says nothing until the node's next
heartbeat takes it again.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlalchemy.engine import Connection

from feedctl.state.store import StateStore

SERVER_START = "SELECT pg_postmaster_start_time()::text"  # what a lock taken now is held under


def key(node_id: str, host: str, pid: int) -> int:
    """The lock of one node process, as PostgreSQL's signed 64-bit advisory key."""
    return _signed(
        int.from_bytes(hashlib.blake2b(f"feedctl node {node_id}/{host}/{pid}".encode(), digest_size=8).digest(), "big")
    )


def _signed(unsigned: int) -> int:
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


def held(conn: Connection) -> tuple[str, set[int]] | None:
    """The server's start and the node locks held now in this database (None: not PostgreSQL)."""
    if conn.dialect.name != "postgresql":
        return None
    start = conn.execute(text(SERVER_START)).scalar()
    rows = conn.execute(
        text(
            "SELECT classid, objid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
    )
    # a bigint key is split over two unsigned 32-bit halves
    return start, {_signed((int(high) << 32) | int(low)) for high, low in rows}


class SessionLock:
    """This process's lock, on a connection of its own outside the pool, out of any transaction (the server
    ends sessions idle inside one)."""

    def __init__(self, store: StateStore):
        self.store = store
        self._raw = None

    def keep(self, node) -> str | None:
        """Hold the lock of `node` (a `nodes.Node`), taking it again on a new connection if the session holding
        it has ended. Returns the server start it is held under; None when it is not held: not PostgreSQL, or
        another session still holds the key (one of this process that the server has not yet seen end)."""
        if self.store.engine.dialect.name != "postgresql":
            return None
        if self._raw is not None:
            try:
                return self._query(SERVER_START)
            except Exception:  # the session ended: the server restarted, or it was cut off
                self.close()
        pooled = self.store.engine.raw_connection()
        self._raw = pooled.driver_connection
        pooled.detach()  # closed by this lock, never handed back to the pool
        self._raw.autocommit = True
        if not self._query(f"SELECT pg_try_advisory_lock({key(node.node_id, node.host, node.pid)})"):
            self.close()
            return None
        return self._query(SERVER_START)

    def _query(self, sql: str):
        with self._raw.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()[0]

    def close(self) -> None:
        if self._raw is not None:
            try:
                self._raw.close()
            except Exception:  # already broken
                pass
            self._raw = None
