"""A coordinator's writes of its one job, each fenced by the job's lease epoch in the caller's transaction. The
state store has one rule for every fenced write (`jobs.fence`: the jobs it wrote, of those asked for); a step of
one job whose job was not written raises why (`jobs.refusal`), and nothing of its transaction commits."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection

from feedctl.options import SchemaChangeAction
from feedctl.state import batch_intents, checkpoints, jobs
from feedctl.state.batch_intents import Intent, IntentKind, NewBatch
from feedctl.units import Hlc


def hold(conn: Connection, job_id: int, epoch: int, **values) -> None:
    """Go on only while `epoch` holds the job's lease and the job runs; `values`: what the job's row takes in the
    same statement."""
    if job_id not in jobs.fence(conn, [(job_id, epoch)], **values):
        raise jobs.refusal(conn, job_id, epoch)


def cut(
    conn: Connection,
    job_id: int,
    epoch: int,
    kind: IntentKind,
    target: Hlc,
    ranges: dict[str, tuple[int, int]],
    schema_changes: dict[str, SchemaChangeAction] | None = None,
) -> Intent:
    """One batch of the job, cut while `epoch` holds its lease."""
    hold(conn, job_id, epoch)
    return batch_intents.cut(conn, {job_id: [NewBatch(target, ranges, kind, schema_changes or {})]})[job_id][0]


def checkpoint(conn: Connection, job_id: int, epoch: int, target: Hlc, intents: Sequence[Intent] = ()) -> None:
    """The job's batches every span emitted (`checkpoints.take`), or time alone (no batch), moving its
    high-water mark to `target`, while `epoch` holds its lease."""
    hold(conn, job_id, epoch)
    checkpoints.take(conn, {job_id: intents}, {job_id: target})


def record_resolved(conn: Connection, job_id: int, epoch: int, resolved: Hlc) -> None:
    """The resolved timestamp written to the sink, recorded while `epoch` holds the lease."""
    hold(conn, job_id, epoch, **checkpoints.resolved_values(resolved))
