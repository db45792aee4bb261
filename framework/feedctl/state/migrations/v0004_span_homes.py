"""A span's home (the locality its data lives in) and what moved it last."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from feedctl.state.migrations import add_column


def upgrade(conn: Connection) -> None:
    add_column(conn, "span_frontiers", "home", "TEXT")
    add_column(conn, "span_frontiers", "note", "TEXT NOT NULL DEFAULT ''")
