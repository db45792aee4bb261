"""What a node watches of the store for all the jobs it works, in one snapshot: a mark per job that changes
whenever something its coordinator or its spans on this node react to changes (`node/watch.py`). A job's
own high-water mark, resolved timestamp and status line are left out: they change at every checkpoint, and
only the coordinator that wrote them moves them. Functions take an open transaction."""

from __future__ import annotations

import time

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from feedctl.state import nodes
from feedctl.state.schema import batch_intents, jobs, node_views, span_frontiers


def job_marks(conn: Connection, job_ids: list[int]) -> dict[int, int]:
    """Per job: its status, definition and lease (and whether the lease has expired), its spans' owners,
    hand-overs and emitted batches, and its pending batches."""
    now = time.time()
    seen: dict[int, list] = {j: [] for j in job_ids}
    for r in conn.execute(
        select(
            jobs.c.job_id,
            jobs.c.status,
            jobs.c.definition_hash,
            jobs.c.coordinator,
            jobs.c.lease_epoch,
            jobs.c.lease_expires_at,
            jobs.c.initial_scan_done,
        ).where(jobs.c.job_id.in_(job_ids))
    ):
        expired = r.lease_expires_at is None or r.lease_expires_at < now
        seen[r.job_id].append((r.status, r.definition_hash, r.coordinator, r.lease_epoch, expired, r.initial_scan_done))
    for r in conn.execute(
        select(
            span_frontiers.c.job_id,
            span_frontiers.c.table_name,
            span_frontiers.c.span,
            span_frontiers.c.node_id,
            span_frontiers.c.moving_to,
            span_frontiers.c.batch_seq,
        )
        .where(span_frontiers.c.job_id.in_(job_ids))
        .order_by(span_frontiers.c.job_id, span_frontiers.c.table_name, span_frontiers.c.span)
    ):
        seen[r.job_id].append((r.table_name, r.span, r.node_id, r.moving_to, r.batch_seq))
    for r in conn.execute(
        select(batch_intents.c.job_id, func.count(), func.max(batch_intents.c.batch_seq))
        .where(and_(batch_intents.c.job_id.in_(job_ids), batch_intents.c.status == "pending"))
        .group_by(batch_intents.c.job_id)
    ):
        seen[r[0]].append((r[1], r[2]))
    return {j: hash(tuple(marks)) for j, marks in seen.items()}


def nodes_mark(conn: Connection, liveness_ttl: float, span_grace: float) -> int:
    """The live nodes, the feeds each works, their localities and views of the feeds; and which dead nodes'
    spans may move (past `span_grace`): a change of any moves every job's spans or rollout."""
    now = time.time()
    members = [
        (
            n.node_id,
            n.pid,
            n.locality,
            n.feeds,
            n.live(now, liveness_ttl),
            not n.live(now, liveness_ttl) and now - n.last_live(liveness_ttl) > span_grace,
        )
        for n in nodes.list_nodes(conn)
    ]
    views = conn.execute(
        select(node_views.c.node_id, node_views.c.feed, node_views.c.view, node_views.c.since).order_by(
            node_views.c.node_id, node_views.c.feed
        )
    ).all()
    return hash((tuple(members), tuple(tuple(v) for v in views)))
