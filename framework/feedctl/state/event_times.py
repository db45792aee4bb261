"""Event timestamps: each version of a job's tables the coordinator recorded, with its commit time, the event
timestamp it is emitted at and its estimated rows and bytes (`event_ts_log`). A timestamp, once recorded, is
never replaced. Reads and writes take many jobs at once where a node's many jobs need them (`record`,
`recorded_in`); each runs inside the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from sqlalchemy import and_, bindparam, func, or_, select
from sqlalchemy.engine import Connection

from feedctl.state.batch_intents import Intent, IntentKind
from feedctl.state.many_rows import fetch, fetch_of, insert_rows, pieces
from feedctl.state.schema import event_ts_log, jobs
from feedctl.units import Hlc

# The reads of every coordinator's step, built once (building a statement costs four times executing it).
_JOB_ID, _TABLE = bindparam("job_id"), bindparam("table")


@dataclass(frozen=True)
class Recorded:
    table: str
    version: int
    commit_ns: int
    event_ts: Hlc
    rows: int
    bytes: int = 0


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
