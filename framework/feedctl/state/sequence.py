"""The store's sequence: numbers that order what different nodes did without their clocks. Each `tick` is
greater than every tick whose transaction committed before it began (the meta row is locked until commit)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from feedctl.state.schema import meta

_KEY = "sequence"


def tick(conn: Connection) -> int:
    """The next number, in the caller's write transaction (the row is made with the store)."""
    found = conn.execute(select(meta.c.value).where(meta.c.key == _KEY).with_for_update()).scalar_one()
    number = int(found) + 1
    conn.execute(update(meta).where(meta.c.key == _KEY).values(value=str(number)))
    return number
