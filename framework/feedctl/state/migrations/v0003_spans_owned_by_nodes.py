"""Spans owned by nodes: the spans' rows and the nodes' registrations are rebuilt by the running nodes,
so they are dropped, not converted (made anew with the tables new since)."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from feedctl.state.schema import nodes, span_frontiers


def upgrade(conn: Connection) -> None:
    span_frontiers.drop(conn, checkfirst=True)
    nodes.drop(conn, checkfirst=True)
