"""What a node reads of its jobs before emitting each one's next batch (`node/share.py`), for many jobs in one
snapshot, in a few statements whatever their number: each job's row and spans, its batches pending, and the
event timestamps of the versions those read. Read for one job at a time, in seven statements or more (a snapshot
each), a commit read by 500 feeds was thousands of statements among the node's hundreds of threads, each letting
the interpreter go to another while the store worked. Functions take an open transaction."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.engine import Connection

from feedctl.state import jobs, spans
from feedctl.state.many_rows import fetch, fetch_of, pieces
from feedctl.state.progress import Intent, IntentKind, Recorded, intent_from_row, recorded_from_row
from feedctl.state.schema import IntentStatus, batch_intents, event_ts_log


@dataclass(frozen=True)
class Pending:
    """A job as one snapshot had it: its row, its spans, its batches pending (cut, not yet emitted by every
    span) by number, and the event timestamps of the versions of each table they read, in order."""

    job: jobs.Job
    spans: list[spans.Span]
    intents: dict[int, Intent]
    versions: dict[str, list[Recorded]]

    def recorded_of(self, intent: Intent) -> dict[str, list[Recorded]]:
        """The event timestamps of the versions one of its pending intents reads, per table (none for a scan)."""
        if intent.kind != IntentKind.CHANGES:
            return {}
        return {t: [r for r in self.versions.get(t, ()) if a < r.version <= b] for t, (a, b) in intent.ranges.items()}


def read(conn: Connection, job_ids: list[int]) -> list[Pending | None]:
    """Each job as the snapshot has it, in order (None: no such job)."""
    found = jobs.get_jobs(conn, job_ids)
    every = spans.of_jobs(conn, list(found))
    intents: dict[int, dict[int, Intent]] = {j: {} for j in found}
    c = batch_intents.c
    waiting = select(batch_intents).where(c.status == IntentStatus.PENDING).order_by(c.job_id, c.batch_seq)
    for row in fetch_of(conn, waiting, c.job_id, list(found)):
        intents[row.job_id][row.batch_seq] = intent_from_row(row)
    versions = _versions(conn, intents)
    return [Pending(found[j], every[j], intents[j], versions.get(j, {})) if j in found else None for j in job_ids]


def _versions(conn: Connection, intents: dict[int, dict[int, Intent]]) -> dict[int, dict[str, list[Recorded]]]:
    """The recorded versions the pending batches of changes of each job read, per table."""
    reach: dict[tuple[int, str], tuple[int, int]] = {}  # (job, table) → the versions after a, up to b
    for job_id, pending in intents.items():
        for intent in pending.values():
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
        for row in fetch(conn, _versions_shape(len(part)), values):
            out.setdefault(row.job_id, {}).setdefault(row.table_name, []).append(recorded_from_row(row))
    return out


@cache
def _versions_shape(ranges: int):
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
