"""What a node's ticker writes for many steady jobs in one transaction, in a few statements whatever the number
of jobs: their new versions recorded (`record`), their batches cut (`cut`), the batches their spans emitted taken
into their marks (`take`). `progress.record`, `create_intent` and `checkpoint` do each for one job, in a few
statements of their own: a round of 500 jobs then took 4,500 statements, and as every statement lets the
interpreter go to another of the node's hundreds of threads while the store works, a round that took a tenth of a
second alone took seconds among them.

Each statement's shape is built and compiled once (`many_rows`).

The caller has fenced every job in the same transaction (`progress.fence_many`): these write only jobs whose
lease it holds. Functions take an open transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from sqlalchemy import and_, bindparam, case, func, select, tuple_, update
from sqlalchemy.engine import Connection

from feedctl.state.many_rows import among, fetch_of, insert_rows, pieces
from feedctl.state.progress import Intent, IntentKind, Recorded, recorded_row
from feedctl.state.schema import IntentStatus, batch_intents, event_ts_log, jobs, table_positions
from feedctl.units import Hlc


@dataclass(frozen=True)
class NewBatch:
    """A batch of changes to cut for a job."""

    target: Hlc
    ranges: dict[str, tuple[int, int]]


def record(conn: Connection, fresh: dict[int, list[Recorded]]) -> None:
    """Each job's new versions (`progress.record`): a table's are kept only if they continue exactly from what
    the job recorded of it, as read here."""
    c = event_ts_log.c
    newest = select(c.job_id, c.table_name, func.max(c.version)).group_by(c.job_id, c.table_name)
    recorded = {(job_id, table): version for job_id, table, version in fetch_of(conn, newest, c.job_id, list(fresh))}
    rows = []
    for job_id, entries in fresh.items():
        for table in dict.fromkeys(e.table for e in entries):
            mine = [e for e in entries if e.table == table]
            last = recorded.get((job_id, table))
            if last is not None and mine[0].version != last + 1:
                continue  # recorded meanwhile: the job's next step computes from what is there
            rows.extend(recorded_row(job_id, e) for e in mine)
    insert_rows(conn, event_ts_log, rows)


def cut(conn: Connection, batches: dict[int, Sequence[NewBatch]]) -> dict[int, list[Intent]]:
    """Each job's new batches of changes, numbered after its last (`progress.create_intent`)."""
    c = batch_intents.c
    newest = select(c.job_id, func.max(c.batch_seq)).group_by(c.job_id)
    last = {job_id: seq for job_id, seq in fetch_of(conn, newest, c.job_id, list(batches))}
    now, rows, intents = time.time(), [], {}
    for job_id, wanted in batches.items():
        seq = last.get(job_id) or 0
        for batch in wanted:
            seq += 1
            intents.setdefault(job_id, []).append(Intent(seq, IntentKind.CHANGES, batch.target, dict(batch.ranges)))
            rows.append(
                {
                    "job_id": job_id,
                    "batch_seq": seq,
                    "status": IntentStatus.PENDING,
                    "kind": IntentKind.CHANGES,
                    "target_wall": batch.target.wall,
                    "target_logical": batch.target.logical,
                    "ranges": json.dumps({t: list(r) for t, r in batch.ranges.items()}, sort_keys=True),
                    "created_at": now,
                    "result": "",
                    "schema_changes": "{}",
                }
            )
    insert_rows(conn, batch_intents, rows)
    return intents


def take(conn: Connection, done: dict[int, Sequence[Intent]]) -> None:
    """Each job's batches every span emitted, in order, taken into its mark (`progress.checkpoint` of each):
    the job's high-water mark at the last one's target, its tables' positions at the versions they reach, the
    batches done."""
    now = time.time()
    marks = [(job_id, intents[-1].target) for job_id, intents in done.items() if intents]
    for part in pieces(marks):
        values = {"now": now}
        for i, (job_id, mark) in enumerate(part):
            values |= {f"job_{i}": job_id, f"wall_{i}": mark.wall, f"logical_{i}": mark.logical}
            values[f"status_{i}"] = f"running: high-water={mark}"
        conn.execute(_marks_update(len(part)), values)
    positions: dict[tuple[int, str], int] = {}
    for job_id, intents in done.items():
        for intent in intents:
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
            running_status=each("status", c.running_status),
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
