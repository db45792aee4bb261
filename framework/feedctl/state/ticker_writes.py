"""What a node's ticker writes for many steady jobs in one transaction, in a few statements whatever the number
of jobs: their new versions recorded (`record`), their batches cut (`cut`), the batches their spans emitted taken
into their marks (`take`). `progress.record`, `create_intent` and `checkpoint` do each for one job, in a few
statements of their own: a round of 500 jobs then took 4,500 statements, and as every statement lets the
interpreter go to another of the node's hundreds of threads while the store works, a round that took a tenth of a
second alone took seconds among them.

The caller has fenced every job in the same transaction (`progress.fence_many`): these write only jobs whose
lease it holds. Functions take an open transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import and_, case, func, insert, select, tuple_, update
from sqlalchemy.engine import Connection

from feedctl.state.progress import Intent, IntentKind, Recorded, recorded_row
from feedctl.state.schema import CHUNK, batch_intents, event_ts_log, jobs, table_positions
from feedctl.units import Hlc


@dataclass(frozen=True)
class NewBatch:
    """A batch of changes to cut for a job."""

    target: Hlc
    ranges: dict[str, tuple[int, int]]


def record(conn: Connection, fresh: dict[int, list[Recorded]]) -> None:
    """Each job's new versions (`progress.record`): a table's are kept only if they continue exactly from what
    the job recorded of it, as read here."""
    recorded: dict[tuple[int, str], int] = {}
    for part in _chunks(list(fresh), CHUNK):
        found = (
            select(event_ts_log.c.job_id, event_ts_log.c.table_name, func.max(event_ts_log.c.version))
            .where(event_ts_log.c.job_id.in_(part))
            .group_by(event_ts_log.c.job_id, event_ts_log.c.table_name)
        )
        recorded.update({(job_id, table): version for job_id, table, version in conn.execute(found)})
    rows = []
    for job_id, entries in fresh.items():
        for table in dict.fromkeys(e.table for e in entries):
            mine = [e for e in entries if e.table == table]
            last = recorded.get((job_id, table))
            if last is not None and mine[0].version != last + 1:
                continue  # recorded meanwhile: the job's next step computes from what is there
            rows.extend(recorded_row(job_id, e) for e in mine)
    for part in _chunks(rows, CHUNK // 8):  # eight parameters a row
        conn.execute(insert(event_ts_log).values(part))


def cut(conn: Connection, batches: dict[int, Sequence[NewBatch]]) -> dict[int, list[Intent]]:
    """Each job's new batches of changes, numbered after its last (`progress.create_intent`)."""
    last: dict[int, int] = {}
    for part in _chunks(list(batches), CHUNK):
        found = (
            select(batch_intents.c.job_id, func.max(batch_intents.c.batch_seq))
            .where(batch_intents.c.job_id.in_(part))
            .group_by(batch_intents.c.job_id)
        )
        last.update(dict(conn.execute(found).all()))
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
                    "status": "pending",
                    "kind": IntentKind.CHANGES,
                    "target_wall": batch.target.wall,
                    "target_logical": batch.target.logical,
                    "ranges": json.dumps({t: list(r) for t, r in batch.ranges.items()}, sort_keys=True),
                    "created_at": now,
                    "result": "",
                    "schema_changes": "{}",
                }
            )
    for part in _chunks(rows, CHUNK // 10):  # ten parameters a row
        conn.execute(insert(batch_intents).values(part))
    return intents


def take(conn: Connection, done: dict[int, Sequence[Intent]]) -> None:
    """Each job's batches every span emitted, in order, taken into its mark (`progress.checkpoint` of each):
    the job's high-water mark at the last one's target, its tables' positions at the versions they reach, the
    batches done."""
    now = time.time()
    marks = {job_id: intents[-1].target for job_id, intents in done.items() if intents}
    for part in _chunks(list(marks), CHUNK // 10):  # seven parameters a job
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id.in_(part))
            .values(
                high_water_wall=case({j: marks[j].wall for j in part}, value=jobs.c.job_id),
                high_water_logical=case({j: marks[j].logical for j in part}, value=jobs.c.job_id),
                running_status=case({j: f"running: high-water={marks[j]}" for j in part}, value=jobs.c.job_id),
                checkpoint_at=now,
                modified_at=now,
            )
        )
    positions: dict[tuple[int, str], int] = {}
    for job_id, intents in done.items():
        for intent in intents:
            positions.update({(job_id, t): b for t, (_, b) in intent.ranges.items()})
    for part in _chunks(list(positions.items()), CHUNK // 5):  # five parameters a table
        keys = [key for key, _ in part]
        conn.execute(
            update(table_positions)
            .where(tuple_(table_positions.c.job_id, table_positions.c.table_name).in_(keys))
            .values(
                version=case(
                    *[
                        (and_(table_positions.c.job_id == j, table_positions.c.table_name == t), version)
                        for (j, t), version in part
                    ],
                    else_=table_positions.c.version,
                )
            )
        )
    taken = [(job_id, i.batch_seq) for job_id, intents in done.items() for i in intents]
    for part in _chunks(taken, CHUNK // 2):
        conn.execute(
            update(batch_intents)
            .where(tuple_(batch_intents.c.job_id, batch_intents.c.batch_seq).in_(part))
            .values(status="done", finished_at=now)
        )


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
