"""A node's views of its feeds kept apart from its registration (`node_views`, made with the tables new
since), each with when the node got it: the column that held them in version 7 goes, or a node of this
version, which does not write it, could not register."""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection


def upgrade(conn: Connection) -> None:
    inspector = inspect(conn)
    if inspector.has_table("nodes") and "views" in {c["name"] for c in inspector.get_columns("nodes")}:
        conn.execute(text("ALTER TABLE nodes DROP COLUMN views"))
