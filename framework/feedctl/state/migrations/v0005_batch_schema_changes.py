"""A batch's schema changes: per table, the feed's action at the version changing its schema."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from feedctl.state.migrations import add_column


def upgrade(conn: Connection) -> None:
    add_column(conn, "batch_intents", "schema_changes", "TEXT NOT NULL DEFAULT ''")
