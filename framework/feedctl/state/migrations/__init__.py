"""The state store's schema, version by version: a module `vNNNN_<what>.py` for each version that changed
tables already there, with `upgrade(conn)`, applied in order to a store older than it, before the tables new
since are made (`metadata.create_all`), all in the one transaction that sets the store's version. A step is
written against the store as it was: it may find a table that a later version made anew, or none."""

from __future__ import annotations

import importlib
import pkgutil
import re

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

_STEP = re.compile(r"^v(\d{4})_\w+$")


def steps() -> list[tuple[int, object]]:
    """(version, module) of every step, oldest first."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        match = _STEP.match(info.name)
        if match:
            found.append((int(match.group(1)), importlib.import_module(f"{__name__}.{info.name}")))
    return sorted(found, key=lambda step: step[0])


def upgrade(conn: Connection, found: int) -> None:
    """Every step above version `found`, in order."""
    for version, module in steps():
        if version > found:
            module.upgrade(conn)


def add_column(conn: Connection, table: str, column: str, ddl: str) -> None:
    """`ALTER TABLE table ADD COLUMN column ddl`, where the table is there without it."""
    inspector = inspect(conn)
    if inspector.has_table(table) and column not in {c["name"] for c in inspector.get_columns(table)}:
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}"))
