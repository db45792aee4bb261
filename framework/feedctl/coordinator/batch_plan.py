"""Cutting the next batch: a time slice (high-water, T] across every table of a feed.

Versions of all tables are taken in event-timestamp order until the row or byte limit is reached (at least
one version, all versions sharing the last timestamp). Every table is then emitted up to T, so the high-water
mark can move to T. When every pending version fits, T moves on to the closed timestamp: no version not
yet seen can get an event timestamp at or below it. A version that changes its table's schema is the
table's only version in its batch: files hold one schema, and what the feed does about the change (a
backfill at the change's timestamp, a stop) happens between the versions before and after it. A change the
feed cannot run past (its query names a dropped column) is never cut: the batches stop before it; so do they
before a change that waits (a key change, cut once every batch before it is emitted). A change the job stops
at (`schema_change_policy: stop`) is the last version cut: no batch holds anything after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from feedctl.options import SchemaChangeAction
from feedctl.state.event_times import Recorded
from feedctl.units import Hlc


@dataclass(frozen=True)
class Plan:
    target: Hlc
    ranges: dict[str, tuple[int, int]]  # table -> (after version, up to version); only tables with changes
    rows: int
    schema_changes: dict[str, str] = field(default_factory=dict)  # table -> the feed's action at its change


def cut(
    positions: dict[str, int],
    pending: list[Recorded],
    high_water: Hlc,
    closed: Hlc,
    max_rows: int,
    end_time: Hlc | None = None,
    max_bytes: int | None = None,
    schema_changes: dict[tuple[str, int], str] | None = None,
) -> Plan | None:
    """The next batch, or None when nothing can advance (no pending version and no newer closed time).
    `schema_changes`: the (table, version) pairs whose schema differs from the version before, with the
    feed's action there."""
    changes = schema_changes or {}
    eligible = sorted(
        (p for p in pending if end_time is None or p.event_ts <= end_time),
        key=lambda p: (p.event_ts, p.table, p.version),
    )
    failing = [
        p.event_ts
        for p in eligible
        if changes.get((p.table, p.version)) in (SchemaChangeAction.FAIL, SchemaChangeAction.WAIT)
    ]
    if failing:  # the feed cannot run past this change (yet): nothing at or after it is cut, nor time moves there
        eligible = [p for p in eligible if p.event_ts < min(failing)]
        closed = high_water
    stops = [p.event_ts for p in eligible if changes.get((p.table, p.version)) == SchemaChangeAction.STOP]
    if stops:  # the job stops at this change: it is cut (its batch ends there), nothing after it, nor time past it
        eligible = [p for p in eligible if p.event_ts <= min(stops)]
        closed = min(max(closed, high_water), min(stops))
    chosen: list[Recorded] = []
    rows = size = 0
    ends_at = None  # the timestamp of a schema change chosen: the batch ends there
    for p in eligible:
        if ends_at is not None and p.event_ts != ends_at:
            break
        changed = (p.table, p.version) in changes
        if changed and any(c.table == p.table for c in chosen):
            # the batch ends below this version's timestamp (the table's earlier versions are below it)
            chosen = [c for c in chosen if c.event_ts < p.event_ts]
            rows = sum(c.rows for c in chosen)
            break
        over = rows + p.rows > max_rows or (max_bytes is not None and size + p.bytes > max_bytes)
        if chosen and over and p.event_ts != chosen[-1].event_ts:
            break
        if changed:
            ends_at = p.event_ts
        chosen.append(p)
        rows += p.rows
        size += p.bytes
    target = chosen[-1].event_ts if chosen else high_water
    if len(chosen) == len(eligible):
        # Nothing at or below the target is left: time may move on to the closed timestamp (a version not
        # yet seen gets an event timestamp above the high-water mark it is recorded under).
        target = max(target, closed if end_time is None else min(closed, end_time))
    if target <= high_water and not chosen:
        return None
    last: dict[str, int] = {}
    for p in chosen:
        last[p.table] = max(p.version, last.get(p.table, p.version))
    return Plan(
        max(target, high_water),
        {t: (positions[t], v) for t, v in last.items()},
        rows,
        {c.table: changes[(c.table, c.version)] for c in chosen if (c.table, c.version) in changes},
    )
