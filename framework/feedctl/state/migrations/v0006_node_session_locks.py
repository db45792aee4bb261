"""A node's session lock: the server start it is held under (PostgreSQL), so that a node whose process
ended on another host is known dead at once."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from feedctl.state.migrations import add_column


def upgrade(conn: Connection) -> None:
    add_column(conn, "nodes", "lock_session", "TEXT")
