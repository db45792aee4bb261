"""A job's progress: table positions, recorded event timestamps, batch intents, checkpoints, resolved.

Each function runs inside the caller's transaction; a checkpoint is fenced by the coordinator's lease
epoch, so a runner that lost its lease can never move the high-water mark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import StrEnum

from sqlalchemy import and_, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from feedctl.options import SchemaChangeAction
from feedctl.state.jobs import JobStatus, LeaseLost, NotRunning, update_held
from feedctl.state.schema import IntentStatus, batch_intents, event_ts_log, jobs, table_positions
from feedctl.units import Hlc


@dataclass(frozen=True)
class Recorded:
    table: str
    version: int
    commit_ns: int
    event_ts: Hlc
    rows: int
    bytes: int = 0


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


# The reads of every coordinator's step, built once (building a statement costs four times executing it).
_JOB_ID, _TABLE = bindparam("job_id"), bindparam("table")
_POSITIONS = select(table_positions).where(table_positions.c.job_id == _JOB_ID)
_LAST_RECORDED = (
    select(event_ts_log)
    .where(and_(event_ts_log.c.job_id == _JOB_ID, event_ts_log.c.table_name == _TABLE))
    .order_by(event_ts_log.c.version.desc())
    .limit(1)
)
_RECORDED_AFTER = (
    select(event_ts_log)
    .where(
        and_(
            event_ts_log.c.job_id == _JOB_ID,
            event_ts_log.c.table_name == _TABLE,
            event_ts_log.c.version > bindparam("after"),
        )
    )
    .order_by(event_ts_log.c.version)
)
_PENDING = (
    select(batch_intents)
    .where(and_(batch_intents.c.job_id == _JOB_ID, batch_intents.c.status == IntentStatus.PENDING))
    .order_by(batch_intents.c.batch_seq)
)
_INTENT = select(batch_intents).where(
    and_(batch_intents.c.job_id == _JOB_ID, batch_intents.c.batch_seq == bindparam("batch_seq"))
)
# What the job's row takes is named by the parameters of each execution: the columns set vary, the statement not.
_FENCE = update(jobs).where(
    and_(
        jobs.c.job_id == bindparam("fenced_job"),
        jobs.c.lease_epoch == bindparam("fenced_epoch"),
        jobs.c.status == JobStatus.RUNNING,
    )
)
_LAST_DONE = select(func.max(batch_intents.c.batch_seq)).where(
    and_(batch_intents.c.job_id == _JOB_ID, batch_intents.c.status == IntentStatus.DONE)
)


def positions(conn: Connection, job_id: int) -> dict[str, tuple[int, int]]:
    """table -> (last emitted version, spans)."""
    rows = conn.execute(_POSITIONS, {"job_id": job_id})
    return {r.table_name: (r.version, r.spans) for r in rows}


def last_recorded(conn: Connection, job_id: int, table: str) -> Recorded | None:
    row = conn.execute(_LAST_RECORDED, {"job_id": job_id, "table": table}).first()
    return recorded_from_row(row) if row else None


def recorded_from_row(row) -> Recorded:
    return Recorded(
        row.table_name, row.version, row.commit_wall, Hlc(row.event_wall, row.event_logical), row.rows, row.bytes
    )


def record(conn: Connection, job_id: int, entries: list[Recorded]) -> None:
    """Record event timestamps computed outside this transaction. A table's entries are kept only if they
    continue exactly from what is recorded now: a timestamp, once recorded, is never replaced."""
    rows = []
    for table in dict.fromkeys(e.table for e in entries):
        mine = [e for e in entries if e.table == table]
        last = last_recorded(conn, job_id, table)
        if last is not None and mine[0].version != last.version + 1:
            continue  # recorded meanwhile: the next step computes from what is there
        rows.extend(recorded_row(job_id, e) for e in mine)
    if rows:
        conn.execute(insert(event_ts_log), rows)


def recorded_row(job_id: int, e: Recorded) -> dict:
    """A version's row of `event_ts_log`."""
    return {
        "job_id": job_id,
        "table_name": e.table,
        "version": e.version,
        "commit_wall": e.commit_ns,
        "event_wall": e.event_ts.wall,
        "event_logical": e.event_ts.logical,
        "rows": e.rows,
        "bytes": e.bytes,
    }


def recorded_after(
    conn: Connection, job_id: int, table: str, after_version: int, up_to: int | None = None
) -> list[Recorded]:
    statement = _RECORDED_AFTER if up_to is None else _RECORDED_AFTER.where(event_ts_log.c.version <= up_to)
    return [
        recorded_from_row(r)
        for r in conn.execute(statement, {"job_id": job_id, "table": table, "after": after_version})
    ]


def first_recorded_above(conn: Connection, feed: str, table: str, ts: Hlc) -> int | None:
    """The lowest version of `table` that any job of `feed` recorded with an event timestamp above `ts`.

    A cursor at an earlier job's high-water mark must not skip a version committed before it but stamped
    after it (and so never emitted by that job)."""
    above = (event_ts_log.c.event_wall > ts.wall) | and_(
        event_ts_log.c.event_wall == ts.wall, event_ts_log.c.event_logical > ts.logical
    )
    return conn.execute(
        select(func.min(event_ts_log.c.version))
        .select_from(event_ts_log.join(jobs, jobs.c.job_id == event_ts_log.c.job_id))
        .where(and_(jobs.c.feed == feed, event_ts_log.c.table_name == table, above))
    ).scalar()


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


def fence(conn: Connection, job_id: int, epoch: int, **values) -> None:
    """Go on only while `epoch` holds the job's lease and the job runs; `values`: what the job's row takes in the
    same statement. The update locks the job's row until the transaction ends, so a claim of the lease waits
    for it (PostgreSQL), or cannot be in between (SQLite)."""
    done = conn.execute(_FENCE, {"fenced_job": job_id, "fenced_epoch": epoch, "modified_at": time.time(), **values})
    if done.rowcount != 1:
        # A paused or canceled job keeps the high-water mark the user saw when stopping it (a cursor set
        # from a canceled job's mark must meet it exactly); the batch in flight is redone on resume.
        row = conn.execute(select(jobs.c.lease_epoch, jobs.c.status).where(jobs.c.job_id == job_id)).first()
        if row is not None and row.lease_epoch == epoch:
            raise NotRunning(row.status)
        raise LeaseLost(f"job {job_id}: lease epoch {epoch} was taken over; nothing written")


def fence_many(conn: Connection, held: list[tuple[int, int]], **values) -> set[int]:
    """`fence` for many jobs at once: `values` into the row of each (job id, lease epoch) whose epoch still holds
    the lease of a running job, in one statement; the ids of the jobs written. The others
    were written nothing."""
    return update_held(
        conn,
        held,
        jobs.c.status == JobStatus.RUNNING,
        {"modified_at": time.time(), **values},
    )


def create_intent(
    conn: Connection,
    job_id: int,
    epoch: int,
    kind: IntentKind,
    target: Hlc,
    ranges: dict[str, tuple[int, int]],
    schema_changes: dict[str, SchemaChangeAction] | None = None,
) -> Intent:
    fence(conn, job_id, epoch)
    last = conn.execute(select(func.max(batch_intents.c.batch_seq)).where(batch_intents.c.job_id == job_id)).scalar()
    seq = (last or 0) + 1
    conn.execute(
        insert(batch_intents).values(
            job_id=job_id,
            batch_seq=seq,
            status=IntentStatus.PENDING,
            kind=kind,
            target_wall=target.wall,
            target_logical=target.logical,
            ranges=json.dumps({t: list(r) for t, r in ranges.items()}, sort_keys=True),
            created_at=time.time(),
            result="",
            schema_changes=json.dumps(schema_changes or {}, sort_keys=True),
        )
    )
    return Intent(seq, kind, target, ranges, dict(schema_changes or {}))


def checkpoint(
    conn: Connection,
    job_id: int,
    epoch: int,
    target: Hlc,
    versions: dict[str, int],
    intent: Intent | None = None,
    scan_done: bool = False,
    running_status: str | None = None,
) -> None:
    """Advance the high-water mark to `target` (every span has emitted everything up to it) and the tables'
    positions to `versions`, in one transaction; the job's row (its mark, its `running_status`) in the
    statement that fences it, as a steady job does this every resolved interval."""
    values = mark_values(target)
    if scan_done:
        values["initial_scan_done"] = 1
    if running_status is not None:
        values["running_status"] = running_status
    fence(conn, job_id, epoch, **values)
    for table, version in versions.items():
        conn.execute(
            update(table_positions)
            .where(and_(table_positions.c.job_id == job_id, table_positions.c.table_name == table))
            .values(version=version)
        )
    if intent is not None:
        conn.execute(
            update(batch_intents)
            .where(and_(batch_intents.c.job_id == job_id, batch_intents.c.batch_seq == intent.batch_seq))
            .values(status=IntentStatus.DONE, finished_at=time.time())
        )


def mark_values(target: Hlc) -> dict:
    """A job row's values for its high-water mark at `target`."""
    return {"high_water_wall": target.wall, "high_water_logical": target.logical, "checkpoint_at": time.time()}


def record_resolved(conn: Connection, job_id: int, epoch: int, resolved: Hlc) -> None:
    """The resolved timestamp written to the sink, recorded while `epoch` holds the lease."""
    fence(conn, job_id, epoch, **resolved_values(resolved))


def resolved_values(resolved: Hlc) -> dict:
    """A job row's values for a resolved timestamp written to its sink now."""
    return {"resolved_wall": resolved.wall, "resolved_logical": resolved.logical, "resolved_at": time.time()}


def add_table(conn: Connection, job_id: int, table: str, version: int, spans: int) -> None:
    """A table added to a running job, followed after `version`."""
    conn.execute(insert(table_positions).values(job_id=job_id, table_name=table, version=version, spans=spans))


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
