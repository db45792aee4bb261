"""Jobs' progress: table positions, recorded event timestamps, batch intents, checkpoints, resolved.

The writes (`record`, `cut`, `take`) take many jobs at once, in a few statements whatever their number, each
statement's shape built once (`many_rows`); one job is a dict of one. Each function runs inside the caller's
transaction, and every write is fenced by the coordinator's lease epoch in it (`fence`, `fence_many`), so a
runner that lost its lease can never move the high-water mark.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache

from sqlalchemy import and_, bindparam, case, func, insert, or_, select, tuple_, update
from sqlalchemy.engine import Connection

from feedctl.options import SchemaChangeAction
from feedctl.state.jobs import JobStatus, LeaseLost, NotRunning, update_held
from feedctl.state.many_rows import among, fetch, fetch_of, insert_rows, pieces
from feedctl.state.schema import CHUNK, IntentStatus, batch_intents, event_ts_log, jobs, table_positions
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


def record(conn: Connection, fresh: dict[int, list[Recorded]]) -> None:
    """Each job's event timestamps computed outside this transaction. A table's are kept only if they continue
    exactly from what the job recorded of it, as read here: a timestamp, once recorded, is never replaced."""
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


def create_intent(
    conn: Connection,
    job_id: int,
    epoch: int,
    kind: IntentKind,
    target: Hlc,
    ranges: dict[str, tuple[int, int]],
    schema_changes: dict[str, SchemaChangeAction] | None = None,
) -> Intent:
    """One batch of one job, cut while `epoch` holds its lease."""
    fence(conn, job_id, epoch)
    return cut(conn, {job_id: [NewBatch(target, ranges, kind, schema_changes or {})]})[job_id][0]


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


def checkpoint(conn: Connection, job_id: int, epoch: int, target: Hlc, intents: Sequence[Intent] = ()) -> None:
    """One job's batches every span emitted (`take`), or time alone (no batch), moving its high-water mark to
    `target`, while `epoch` holds its lease."""
    fence(conn, job_id, epoch)
    take(conn, {job_id: intents}, {job_id: target})


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


def recorded_in(conn: Connection, intents: dict[int, dict[int, Intent]]) -> dict[int, dict[str, list[Recorded]]]:
    """The recorded versions each job's batches of changes read, per table, in order, in a statement per few
    hundred ranges whatever the number of jobs."""
    reach: dict[tuple[int, str], tuple[int, int]] = {}  # (job, table) → the versions after a, up to b
    for job_id, of_job in intents.items():
        for intent in of_job.values():
            if intent.kind != IntentKind.CHANGES:
                continue
            for table, (a, b) in intent.ranges.items():
                lo, hi = reach.get((job_id, table), (a, b))
                reach[(job_id, table)] = (min(lo, a), max(hi, b))
    out: dict[int, dict[str, list[Recorded]]] = {}
    for part in pieces(list(reach.items())):
        values = {}
        for i, ((job_id, table), (a, b)) in enumerate(part):
            values |= {f"job_{i}": job_id, f"table_{i}": table, f"after_{i}": a, f"upto_{i}": b}
        for row in fetch(conn, _recorded_shape(len(part)), values):
            out.setdefault(row.job_id, {}).setdefault(row.table_name, []).append(recorded_from_row(row))
    return out


@cache
def _recorded_shape(ranges: int):
    c = event_ts_log.c
    return (
        select(event_ts_log)
        .where(
            or_(
                *[
                    and_(
                        c.job_id == bindparam(f"job_{i}", type_=c.job_id.type),
                        c.table_name == bindparam(f"table_{i}", type_=c.table_name.type),
                        c.version > bindparam(f"after_{i}", type_=c.version.type),
                        c.version <= bindparam(f"upto_{i}", type_=c.version.type),
                    )
                    for i in range(ranges)
                ]
            )
        )
        .order_by(c.job_id, c.table_name, c.version)
    )
