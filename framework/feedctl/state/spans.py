"""The spans of a job and the nodes that own them. The coordinator places spans (`coordinator/span_owner.py`);
each owner emits its spans' share of every batch, in order, and commits their frontiers itself (`emitted`, for
many jobs in a few statements). A commit is a compare-and-swap on (owner, previous batch), so a node that lost a
span, or a second process acting for the same node, never moves it. Functions take an open transaction."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import and_, bindparam, case, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from feedctl.state.jobs import JobStatus
from feedctl.state.many_rows import among, fetch_of, updated
from feedctl.state.schema import CHUNK, jobs
from feedctl.state.schema import span_frontiers as spans_table
from feedctl.units import Hlc

# A span this far behind now is lagging (CockroachDB's `lagging_ranges_threshold` default).
LAGGING_SECONDS = 180.0


@dataclass(frozen=True)
class Span:
    table: str
    span: int
    node: str | None  # its owner; None until placed, or once released
    moving_to: str | None  # the node it goes to at its owner's next batch boundary
    batch_seq: int  # the last batch whose share of this span was emitted
    frontier: Hlc  # that batch's target: every change of the span up to it is emitted
    reason: str  # home, closest, balanced or any (`coordinator/span_owner.py`)
    assigned_at: float | None
    home: str | None = None  # the locality its data lives in
    note: str = ""  # what moved it last

    @property
    def key(self) -> tuple[str, int]:
        return self.table, self.span


def _span(row) -> Span:
    return Span(
        row.table_name,
        row.span,
        row.node_id,
        row.moving_to,
        row.batch_seq,
        Hlc(row.wall, row.logical),
        row.reason,
        row.assigned_at,
        row.home,
        row.note,
    )


def _where(job_id: int, table: str, span: int):
    return and_(spans_table.c.job_id == job_id, spans_table.c.table_name == table, spans_table.c.span == span)


def ensure(
    conn: Connection,
    job_id: int,
    counts: dict[str, int],
    batch_seq: int,
    frontier: Hlc,
    homes: dict[str, str | None] | None = None,
) -> None:
    """Rows for spans that have none (a new job, or a store upgraded from one node), unplaced, at the
    job's last finished batch; and each span's home, the locality of its table's data. (Regional-by-row
    tables get their spans region by region: `add_regions`.)"""
    homes = homes or {}
    have = {
        (r.table_name, r.span): r.home
        for r in conn.execute(
            select(spans_table.c.table_name, spans_table.c.span, spans_table.c.home).where(
                spans_table.c.job_id == job_id
            )
        )
    }
    rows = [
        {
            "job_id": job_id,
            "table_name": t,
            "span": s,
            "wall": frontier.wall,
            "logical": frontier.logical,
            "batch_seq": batch_seq,
            "reason": "",
            "home": homes.get(t),
            "note": "",
        }
        for t, n in sorted(counts.items())
        for s in range(n)
        if (t, s) not in have
    ]
    if rows:
        conn.execute(insert(spans_table), rows)
    for table in {t for (t, _), home in have.items() if t in homes and home != homes[t]}:  # locality edited
        conn.execute(
            update(spans_table)
            .where(and_(spans_table.c.job_id == job_id, spans_table.c.table_name == table))
            .values(home=homes[table])
        )


def add_regions(
    conn: Connection, job_id: int, table: str, homes: list[str | None], per_region: int, batch_seq: int, frontier: Hlc
) -> list[str | None]:
    """Spans for the regions (by home) of a regional-by-row table that have none yet, `per_region` each in a
    block after the last, unplaced, from batch `batch_seq` on (no earlier batch holds a row of theirs).
    Returns the homes added."""
    rows = conn.execute(
        select(spans_table.c.span, spans_table.c.home).where(
            and_(spans_table.c.job_id == job_id, spans_table.c.table_name == table)
        )
    ).all()
    known = {r.home for r in rows}
    new = [h for h in dict.fromkeys(homes) if h not in known]
    slot = max((r.span for r in rows), default=-1) // per_region + 1
    if new:
        conn.execute(
            insert(spans_table),
            [
                {
                    "job_id": job_id,
                    "table_name": table,
                    "span": (slot + i) * per_region + k,
                    "wall": frontier.wall,
                    "logical": frontier.logical,
                    "batch_seq": batch_seq,
                    "reason": "",
                    "home": home,
                    "note": "new region",
                }
                for i, home in enumerate(new)
                for k in range(per_region)
            ],
        )
    return new


def retire(conn: Connection, job_id: int, table: str) -> None:
    """The table's spans go, every batch of theirs emitted: its key changed, and rows fall in new spans."""
    conn.execute(delete(spans_table).where(and_(spans_table.c.job_id == job_id, spans_table.c.table_name == table)))


# Read at every step of a coordinator and every poll of a node's spans: built once (building a statement costs
# four times executing it).
_OF_JOB = (
    select(spans_table)
    .where(spans_table.c.job_id == bindparam("job_id"))
    .order_by(spans_table.c.table_name, spans_table.c.span)
)


def of_job(conn: Connection, job_id: int) -> list[Span]:
    return [_span(r) for r in conn.execute(_OF_JOB, {"job_id": job_id})]


def of_jobs(conn: Connection, job_ids) -> dict[int, list[Span]]:
    """The spans of many jobs, read in one statement (a node's scrape of a thousand feeds)."""
    out: dict[int, list[Span]] = {j: [] for j in job_ids}
    c = spans_table.c
    for r in fetch_of(conn, select(spans_table).order_by(c.job_id, c.table_name, c.span), c.job_id, list(out)):
        out[r.job_id].append(_span(r))
    return out


def assign(conn: Connection, job_id: int, span: Span, node: str, reason: str, note: str = "") -> bool:
    """Give `span` to `node` now, if its owner is still the one the coordinator saw."""
    owner = spans_table.c.node_id.is_(None) if span.node is None else spans_table.c.node_id == span.node
    return (
        conn.execute(
            update(spans_table)
            .where(and_(_where(job_id, *span.key), owner))
            .values(node_id=node, moving_to=None, reason=reason, note=note, assigned_at=time.time())
        ).rowcount
        == 1
    )


def hand_over(conn: Connection, job_id: int, span: Span, node: str | None, reason: str = "", note: str = "") -> None:
    """Move `span` to `node` at its owner's next batch boundary (None: stay where it is, as it is)."""
    values = (
        {"moving_to": node, "reason": reason, "note": note}
        if node is not None
        else {"moving_to": None, "note": f"hand-over to {span.moving_to} called off"}
    )
    conn.execute(
        update(spans_table).where(and_(_where(job_id, *span.key), spans_table.c.node_id == span.node)).values(**values)
    )


@dataclass(frozen=True)
class Emitted:
    """A node's spans `keys` of a job emitted the batches after `after` up to `batch_seq` (whose target is
    `target`)."""

    job_id: int
    node: str
    keys: list[tuple[str, int]]
    batch_seq: int
    target: Hlc
    after: int


def emitted(conn: Connection, records: list[Emitted]) -> list[list[tuple[str, int]]]:
    """Each record's spans moved past its batch, in a few statements whatever the number of jobs; per record, in
    order, the spans its node still owned at `after` (the others were moved, or recorded first by another
    process of the node)."""
    done: list[list[tuple[str, int]]] = [[] for _ in records]
    for round_ in _rounds(records):
        by_node: dict[str, dict[int, int]] = defaultdict(dict)
        for job_id, i in round_.items():
            by_node[records[i].node][job_id] = i
        for node, by_job in by_node.items():
            _emitted(conn, node, by_job, records, done)
    return done


def _rounds(records: list[Emitted]) -> list[dict[int, int]]:
    """The records in rounds holding one record of a job each (job id → its index): a statement sets each job's
    spans one way."""
    rounds: list[dict[int, int]] = []
    for i, e in enumerate(records):
        round_ = next((r for r in rounds if e.job_id not in r), None)
        if round_ is None:
            round_ = {}
            rounds.append(round_)
        round_[e.job_id] = i
    return rounds


def _emitted(
    conn: Connection, node: str, by_job: dict[int, int], records: list[Emitted], done: list[list[tuple[str, int]]]
) -> None:
    """One node's spans of jobs (one record each, `by_job`: its index), moved past their batches, a statement per
    few hundred spans (a compare-and-swap on owner and batch); those it still owned go to `done` at the record's
    index."""
    for part in _parts([(job_id, records[i].keys) for job_id, i in by_job.items()], CHUNK // 4):
        mine = {job_id: records[by_job[job_id]] for job_id, _ in part}
        keys = [(job_id, table, span) for job_id, spans in part for table, span in spans]
        c = spans_table.c
        where = and_(
            among(conn, (c.job_id, c.table_name, c.span), keys),
            c.node_id == node,
            c.batch_seq == case({j: e.after for j, e in mine.items()}, value=c.job_id),
        )
        values = {
            "batch_seq": case({j: e.batch_seq for j, e in mine.items()}, value=c.job_id),
            "wall": case({j: e.target.wall for j, e in mine.items()}, value=c.job_id),
            "logical": case({j: e.target.logical for j, e in mine.items()}, value=c.job_id),
        }
        for job_id, table, span in updated(conn, spans_table, where, values, (c.job_id, c.table_name, c.span)):
            done[by_job[job_id]].append((table, span))


def _parts(jobs: list[tuple[int, list]], spans: int) -> list[list[tuple[int, list]]]:
    """The jobs in parts of about `spans` spans (a job's spans never split)."""
    parts, part, size = [], [], 0
    for job in jobs:
        if part and size + len(job[1]) > spans:
            parts.append(part)
            part, size = [], 0
        part.append(job)
        size += len(job[1])
    if part:
        parts.append(part)
    return parts


def boundary(conn: Connection, node: str, job_id: int | None = None, release: bool = False) -> int:
    """At a batch boundary of `node`: its spans bound for another node go there; with `release` (a drain),
    all others are left unplaced for the coordinator to place at once. Returns how many spans moved."""
    mine = spans_table.c.node_id == node
    if job_id is not None:
        mine = and_(mine, spans_table.c.job_id == job_id)
    moved = conn.execute(
        update(spans_table)
        .where(and_(mine, spans_table.c.moving_to.is_not(None)))
        .values(node_id=spans_table.c.moving_to, moving_to=None, note=f"handed over by {node}", assigned_at=time.time())
    ).rowcount
    if release:
        moved += conn.execute(
            update(spans_table).where(mine).values(node_id=None, note=f"released by {node}", assigned_at=time.time())
        ).rowcount
    return moved


def held_per_job(conn: Connection, job_ids) -> dict[str, dict[int, int]]:
    """Spans owned per node id and job, over the given jobs (ids, or a query giving them)."""
    per: dict[str, dict[int, int]] = {}
    for node, job_id, count in conn.execute(
        select(spans_table.c.node_id, spans_table.c.job_id, func.count())
        .where(and_(spans_table.c.job_id.in_(job_ids), spans_table.c.node_id.is_not(None)))
        .group_by(spans_table.c.node_id, spans_table.c.job_id)
    ):
        per.setdefault(node, {})[job_id] = count
    return per


# Spans owned per node id over the running jobs other than one: a row per node, however many jobs (a
# coordinator asks at every placement). Built once.
_HELD_ELSEWHERE = (
    select(spans_table.c.node_id, func.count())
    .where(
        and_(
            spans_table.c.job_id.in_(
                select(jobs.c.job_id).where(
                    and_(jobs.c.status == JobStatus.RUNNING, jobs.c.job_id != bindparam("job_id"))
                )
            ),
            spans_table.c.node_id.is_not(None),
        )
    )
    .group_by(spans_table.c.node_id)
)


def held_elsewhere(conn: Connection, job_id: int) -> dict[str, int]:
    """Spans owned per node id over the running jobs other than `job_id`."""
    return dict(conn.execute(_HELD_ELSEWHERE, {"job_id": job_id}).all())


def lag_seconds(span: Span, high_water: Hlc, now: float) -> float | None:
    """How far behind `now` the span has emitted (a time-only advance of the job moves every span)."""
    frontier = max(span.frontier, high_water)
    return now - frontier.wall / 1e9 if frontier.wall else None


def lagging(rows: list[Span], high_water: Hlc, live: set[str], now: float) -> list[Span]:
    """A running job's spans more than `LAGGING_SECONDS` behind now, or held by a node that is not live."""
    return [s for s in rows if s.node not in live or (lag_seconds(s, high_water, now) or 0) > LAGGING_SECONDS]


def lowest_of(conn: Connection, job_ids: list[int]) -> dict[int, int]:
    """`lowest` of many jobs, in a statement per thousand jobs (jobs without span rows left out)."""
    c = spans_table.c
    statement = select(c.job_id, func.min(c.batch_seq)).group_by(c.job_id)
    return {job_id: seq for job_id, seq in fetch_of(conn, statement, c.job_id, job_ids)}


def lowest(conn: Connection, job_id: int) -> int | None:
    """The batch every span of the job has emitted (None: the job has no span rows yet)."""
    return lowest_of(conn, [job_id]).get(job_id)


def owners_of(conn: Connection, job_ids: list[int]):
    """The statement of the jobs' spans, their owners, hand-overs and last batches emitted, in order."""
    c = spans_table.c
    return (
        select(c.job_id, c.table_name, c.span, c.node_id, c.moving_to, c.batch_seq)
        .where(among(conn, c.job_id, job_ids))
        .order_by(c.job_id, c.table_name, c.span)
    )
