"""Checkpoints: a job's high-water mark, its tables' positions (the version each is emitted up to, and its
spans: `table_positions`), and its resolved timestamp as written to the sink. `take` moves many jobs' marks in a
few statements whatever their number, each statement's shape built once (`many_rows`); one job is a dict of
one. Each runs inside the caller's transaction, which has fenced the jobs it writes (`jobs.fence`), so that a
node that lost a job's lease never moves its mark."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cache

from sqlalchemy import and_, bindparam, case, insert, select, tuple_, update
from sqlalchemy.engine import Connection

from feedctl.state.batch_intents import Intent, IntentKind
from feedctl.state.many_rows import among, pieces
from feedctl.state.schema import IntentStatus, batch_intents, jobs, table_positions
from feedctl.units import Hlc

_POSITIONS = select(table_positions).where(table_positions.c.job_id == bindparam("job_id"))


def positions(conn: Connection, job_id: int) -> dict[str, tuple[int, int]]:
    """table -> (last emitted version, spans)."""
    rows = conn.execute(_POSITIONS, {"job_id": job_id})
    return {r.table_name: (r.version, r.spans) for r in rows}


def take(conn: Connection, done: dict[int, Sequence[Intent]], marks: dict[int, Hlc] | None = None) -> None:
    """Each job's batches every span emitted, in order, taken into its mark, in a few statements whatever the
    number of jobs: its high-water mark at `marks[job]` (by default the last batch's target; no batch: time
    alone moved it), its tables' positions at the versions its batches of changes reach, the batches done, a
    scan among them its initial scan done. The caller has fenced every job in the same transaction."""
    now = time.time()
    marks = {**{job_id: intents[-1].target for job_id, intents in done.items() if intents}, **(marks or {})}
    for part in pieces(list(marks.items())):
        values = {"now": now}
        for i, (job_id, mark) in enumerate(part):
            values |= {f"job_{i}": job_id, f"wall_{i}": mark.wall, f"logical_{i}": mark.logical}
        conn.execute(_marks_update(len(part)), values)
    positions: dict[tuple[int, str], int] = {}
    for job_id, intents in done.items():
        for intent in intents:
            if intent.kind == IntentKind.CHANGES:
                positions.update({(job_id, t): b for t, (_, b) in intent.ranges.items()})
    for part in pieces(list(positions.items())):
        values = {}
        for i, ((job_id, table), version) in enumerate(part):
            values |= {f"job_{i}": job_id, f"table_{i}": table, f"version_{i}": version}
        conn.execute(_positions_update(len(part)), values)
    taken = [(job_id, i.batch_seq) for job_id, intents in done.items() for i in intents]
    if taken:
        conn.execute(
            update(batch_intents)
            .where(among(conn, (batch_intents.c.job_id, batch_intents.c.batch_seq), taken))
            .values(status=IntentStatus.DONE, finished_at=now)
        )
    scanned = [job_id for job_id, intents in done.items() if any(i.kind == IntentKind.SCAN for i in intents)]
    if scanned:
        conn.execute(update(jobs).where(among(conn, jobs.c.job_id, scanned)).values(initial_scan_done=1))


@cache
def _marks_update(rows: int):
    """The high-water marks of `rows` jobs."""
    c = jobs.c
    job = [bindparam(f"job_{i}", type_=c.job_id.type) for i in range(rows)]

    def each(name: str, column):
        return case(*[(c.job_id == job[i], bindparam(f"{name}_{i}", type_=column.type)) for i in range(rows)])

    return (
        update(jobs)
        .where(c.job_id.in_(job))
        .values(
            high_water_wall=each("wall", c.high_water_wall),
            high_water_logical=each("logical", c.high_water_logical),
            running_status="",  # the mark moved: whatever the note said the job met is over
            checkpoint_at=bindparam("now", type_=c.checkpoint_at.type),
            modified_at=bindparam("now", type_=c.modified_at.type),
        )
    )


@cache
def _positions_update(rows: int):
    """The versions `rows` (job, table) positions reach."""
    c = table_positions.c
    job = [bindparam(f"job_{i}", type_=c.job_id.type) for i in range(rows)]
    table = [bindparam(f"table_{i}", type_=c.table_name.type) for i in range(rows)]
    version = [bindparam(f"version_{i}", type_=c.version.type) for i in range(rows)]
    return (
        update(table_positions)
        .where(tuple_(c.job_id, c.table_name).in_([tuple_(job[i], table[i]) for i in range(rows)]))
        .values(version=case(*[(and_(c.job_id == job[i], c.table_name == table[i]), version[i]) for i in range(rows)]))
    )


def mark_values(target: Hlc) -> dict:
    """A job row's values for its high-water mark at `target`."""
    return {"high_water_wall": target.wall, "high_water_logical": target.logical, "checkpoint_at": time.time()}


def resolved_values(resolved: Hlc) -> dict:
    """A job row's values for a resolved timestamp written to its sink now."""
    return {"resolved_wall": resolved.wall, "resolved_logical": resolved.logical, "resolved_at": time.time()}


def add_table(conn: Connection, job_id: int, table: str, version: int, spans: int) -> None:
    """A table added to a running job, followed after `version`."""
    conn.execute(insert(table_positions).values(job_id=job_id, table_name=table, version=version, spans=spans))
