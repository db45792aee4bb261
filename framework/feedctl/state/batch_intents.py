"""Batch intents: the batches a job's coordinator cut (a version range of each table changed, or a scan, up to a
target timestamp), pending until every span emitted them, then done (`batch_intents`). Writes take many jobs at
once (`cut`, `add_results`), as does the read before a node emits (`pending_of`); one job is a dict of one. Each
runs inside the caller's transaction, which has fenced the jobs it writes (`jobs.fence`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sqlalchemy import and_, bindparam, case, func, select, update
from sqlalchemy.engine import Connection

from feedctl.options import SchemaChangeAction
from feedctl.state.many_rows import among, fetch, fetch_of, insert_rows
from feedctl.state.schema import CHUNK, IntentStatus, batch_intents, table_positions
from feedctl.units import Hlc

# The reads of every coordinator's step, built once (building a statement costs four times executing it).
_JOB_ID = bindparam("job_id")


class IntentKind(StrEnum):
    """What a batch emits (stored as its text)."""

    SCAN = "scan"  # a table's rows at a version, as inserts (the initial scan, a table added in place)
    CHANGES = "changes"  # the changes of version ranges


@dataclass(frozen=True)
class Intent:
    batch_seq: int
    kind: IntentKind
    target: Hlc
    ranges: dict[str, tuple[int, int]]
    # tables whose range is one version changing their schema -> what the feed does there
    schema_changes: dict[str, SchemaChangeAction] = field(default_factory=dict)


_PENDING = (
    select(batch_intents)
    .where(and_(batch_intents.c.job_id == _JOB_ID, batch_intents.c.status == IntentStatus.PENDING))
    .order_by(batch_intents.c.batch_seq)
)
_INTENT = select(batch_intents).where(
    and_(batch_intents.c.job_id == _JOB_ID, batch_intents.c.batch_seq == bindparam("batch_seq"))
)
_LAST_DONE = select(func.max(batch_intents.c.batch_seq)).where(
    and_(batch_intents.c.job_id == _JOB_ID, batch_intents.c.status == IntentStatus.DONE)
)


def intent_from_row(row) -> Intent:
    ranges = {t: (a, b) for t, (a, b) in json.loads(row.ranges).items()}
    return Intent(
        row.batch_seq,
        IntentKind(row.kind),
        Hlc(row.target_wall, row.target_logical),
        ranges,
        {t: SchemaChangeAction(a) for t, a in json.loads(row.schema_changes or "{}").items()},
    )


def pending_intents(conn: Connection, job_id: int) -> list[Intent]:
    """The batches cut and not yet emitted by every span, in order."""
    return [intent_from_row(r) for r in conn.execute(_PENDING, {"job_id": job_id})]


def intent(conn: Connection, job_id: int, batch_seq: int) -> Intent | None:
    row = conn.execute(_INTENT, {"job_id": job_id, "batch_seq": batch_seq}).first()
    return intent_from_row(row) if row is not None and row.status == IntentStatus.PENDING else None


def last_done(conn: Connection, job_id: int) -> int:
    """The last batch every span emitted and the high-water mark took in (0 before any)."""
    return conn.execute(_LAST_DONE, {"job_id": job_id}).scalar() or 0


def last_cut(conn: Connection, job_id: int) -> tuple[int, Hlc] | None:
    """The newest batch cut, emitted or not, and its target (None before any)."""
    row = conn.execute(
        select(batch_intents.c.batch_seq, batch_intents.c.target_wall, batch_intents.c.target_logical)
        .where(batch_intents.c.job_id == job_id)
        .order_by(batch_intents.c.batch_seq.desc())
        .limit(1)
    ).first()
    return (row.batch_seq, Hlc(row.target_wall, row.target_logical)) if row else None


@dataclass(frozen=True)
class NewBatch:
    """A batch to cut for a job."""

    target: Hlc
    ranges: dict[str, tuple[int, int]]
    kind: IntentKind = IntentKind.CHANGES
    schema_changes: dict[str, SchemaChangeAction] = field(default_factory=dict)


def cut(conn: Connection, batches: dict[int, Sequence[NewBatch]]) -> dict[int, list[Intent]]:
    """Each job's new batches, numbered after its last, in a few statements whatever the number of jobs. The
    caller has fenced every job in the same transaction (`fence`, `fence_many`)."""
    c = batch_intents.c
    newest = select(c.job_id, func.max(c.batch_seq)).group_by(c.job_id)
    last = {job_id: seq for job_id, seq in fetch_of(conn, newest, c.job_id, list(batches))}
    now, rows, intents = time.time(), [], {}
    for job_id, wanted in batches.items():
        seq = last.get(job_id) or 0
        for batch in wanted:
            seq += 1
            intent = Intent(seq, batch.kind, batch.target, dict(batch.ranges), dict(batch.schema_changes))
            intents.setdefault(job_id, []).append(intent)
            rows.append(
                {
                    "job_id": job_id,
                    "batch_seq": seq,
                    "status": IntentStatus.PENDING,
                    "kind": batch.kind,
                    "target_wall": batch.target.wall,
                    "target_logical": batch.target.logical,
                    "ranges": json.dumps({t: list(r) for t, r in batch.ranges.items()}, sort_keys=True),
                    "created_at": now,
                    "result": "",
                    "schema_changes": json.dumps(batch.schema_changes, sort_keys=True),
                }
            )
    insert_rows(conn, batch_intents, rows)
    return intents


def scans_cut(conn: Connection, job_id: int) -> set[str]:
    """The tables some scan of the job read (cut, whether emitted yet or not)."""
    rows = conn.execute(
        select(batch_intents.c.ranges).where(
            and_(batch_intents.c.job_id == job_id, batch_intents.c.kind == IntentKind.SCAN)
        )
    )
    return {table for r in rows for table in json.loads(r.ranges)}


def last_cut_version(conn: Connection, job_id: int, table: str) -> int:
    """The newest version of `table` in a batch cut (its position when no batch since holds it)."""
    position = conn.execute(
        select(table_positions.c.version).where(
            and_(table_positions.c.job_id == job_id, table_positions.c.table_name == table)
        )
    ).scalar()
    ends = [
        json.loads(r.ranges).get(table, (None, -1))[1]
        for r in conn.execute(
            select(batch_intents.c.ranges).where(
                and_(batch_intents.c.job_id == job_id, batch_intents.c.kind == IntentKind.CHANGES)
            )
        )
    ]
    return max([position if position is not None else -1, *ends])


def add_results(conn: Connection, results: list[tuple[int, dict[int, dict]]]) -> None:
    """What each (job id, {batch: result}) wrote added to what its batches recorded (the nodes' shares of them),
    each batch's row locked meanwhile: nodes add their shares at once, and none is lost."""
    added: dict[tuple[int, int], dict] = {}
    for job_id, of_batches in results:
        for batch_seq, result in of_batches.items():
            total = added.setdefault((job_id, batch_seq), {})
            for name, value in result.items():
                total[name] = total.get(name, 0) + value
    keys = list(added)
    c = batch_intents.c
    for at in range(0, len(keys), CHUNK // 4):
        part = keys[at : at + CHUNK // 4]
        rows = fetch(
            conn,
            select(c.job_id, c.batch_seq, c.result)
            .where(among(conn, (c.job_id, c.batch_seq), part))
            .order_by(c.job_id, c.batch_seq)  # locked in one order on every node
            .with_for_update(),
        )
        if not rows:
            continue
        totals = {}
        for job_id, batch_seq, result in rows:
            total = json.loads(result or "{}")
            for name, value in added[job_id, batch_seq].items():
                total[name] = total.get(name, 0) + value
            totals[job_id, batch_seq] = json.dumps(total, sort_keys=True)
        conn.execute(
            update(batch_intents)
            .where(among(conn, (c.job_id, c.batch_seq), list(totals)))
            .values(
                result=case(
                    *[(and_(c.job_id == j, c.batch_seq == seq), text) for (j, seq), text in totals.items()],
                    else_=c.result,
                )
            )
        )


def pending_of(conn: Connection, job_ids: list[int]) -> dict[int, dict[int, Intent]]:
    """Each job's batches pending (cut, not yet emitted by every span), by number, in one statement whatever
    the number of jobs."""
    out: dict[int, dict[int, Intent]] = {j: {} for j in job_ids}
    c = batch_intents.c
    waiting = select(batch_intents).where(c.status == IntentStatus.PENDING).order_by(c.job_id, c.batch_seq)
    for row in fetch_of(conn, waiting, c.job_id, list(job_ids)):
        out[row.job_id][row.batch_seq] = intent_from_row(row)
    return out


def pending_counts(conn: Connection, job_ids: list[int]):
    """The statement of the jobs' pending batches: how many each, and the last."""
    c = batch_intents.c
    return (
        select(c.job_id, func.count().label("batches"), func.max(c.batch_seq).label("last"))
        .where(and_(among(conn, c.job_id, job_ids), c.status == IntentStatus.PENDING))
        .group_by(c.job_id)
        .order_by(c.job_id)
    )
