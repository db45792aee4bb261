"""What a node watches of the store for all the jobs it works, in one snapshot: a mark per job that changes
whenever something its coordinator or its spans on this node react to changes (`node/watch.py`). A job's
own high-water mark, resolved timestamp and status line are left out: they change at every checkpoint, and
only the coordinator that wrote them moves them. Functions take an open transaction."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from feedctl.state import nodes
from feedctl.state.many_rows import among, fetch
from feedctl.state.schema import batch_intents, jobs, node_views, span_frontiers


@dataclass(frozen=True)
class JobMarks:
    """What a job's coordinator and its spans on a node react to, each as a hash."""

    coordinator: int
    spans: int


def job_marks(conn: Connection, job_ids: list[int], node_id: str, holder: str) -> dict[int, JobMarks]:
    """Per job, as node `node_id` (whose leases `holder` holds) sees it. Both marks hold the job's status,
    definition and lease (and whether the lease has expired), its spans' owners and hand-overs, and the nodes'
    views of its feed. While this node coordinates the job, the coordinator's adds the batches the spans of
    other nodes emitted (this node's wake it when they record theirs); while another may, the spans' add the
    pending batches (a coordinator here wakes this node's spans itself when it cuts one). Neither mark then
    changes with what this node did alone."""
    now = time.time()
    common: dict[int, list] = {j: [] for j in job_ids}
    emitted: dict[int, list] = {j: [] for j in job_ids}  # by the spans of other nodes
    here: dict[int, bool] = {}
    feed_of: dict[int, str] = {}
    for r in fetch(
        conn,
        select(
            jobs.c.job_id,
            jobs.c.feed,
            jobs.c.status,
            jobs.c.definition_hash,
            jobs.c.coordinator,
            jobs.c.lease_epoch,
            jobs.c.lease_expires_at,
            jobs.c.initial_scan_done,
        ).where(among(conn, jobs.c.job_id, job_ids)),
    ):
        # A lease of this node's past its time is still its own until another node takes it (a new epoch):
        # its renewal, late under load, would otherwise wake every job whose lease it renews.
        here[r.job_id] = r.coordinator == holder
        feed_of[r.job_id] = r.feed
        expired = not here[r.job_id] and (r.lease_expires_at is None or r.lease_expires_at < now)
        common[r.job_id].append(
            (r.status, r.definition_hash, r.coordinator, r.lease_epoch, expired, r.initial_scan_done)
        )
    for r in fetch(
        conn,
        select(
            span_frontiers.c.job_id,
            span_frontiers.c.table_name,
            span_frontiers.c.span,
            span_frontiers.c.node_id,
            span_frontiers.c.moving_to,
            span_frontiers.c.batch_seq,
        )
        .where(among(conn, span_frontiers.c.job_id, job_ids))
        .order_by(span_frontiers.c.job_id, span_frontiers.c.table_name, span_frontiers.c.span),
    ):
        common[r.job_id].append((r.table_name, r.span, r.node_id, r.moving_to))
        if r.node_id != node_id:
            emitted[r.job_id].append((r.table_name, r.span, r.batch_seq))
    # The nodes' views of the feed: a view a node publishes (as its runner of the feed starts, or its copy of
    # the project changes) wakes that feed's jobs only, not every job of every node that looks.
    views: dict[str, list] = {}
    for r in fetch(
        conn,
        select(node_views.c.feed, node_views.c.node_id, node_views.c.view, node_views.c.since)
        .where(among(conn, node_views.c.feed, sorted(set(feed_of.values()))))
        .order_by(node_views.c.feed, node_views.c.node_id),
    ):
        views.setdefault(r.feed, []).append((r.node_id, r.view, r.since))
    for job_id, feed in feed_of.items():
        common[job_id].append(tuple(views.get(feed, ())))
    pending: dict[int, tuple] = {}
    for r in fetch(
        conn,
        select(batch_intents.c.job_id, func.count(), func.max(batch_intents.c.batch_seq))
        .where(and_(among(conn, batch_intents.c.job_id, job_ids), batch_intents.c.status == "pending"))
        .group_by(batch_intents.c.job_id),
    ):
        pending[r[0]] = (r[1], r[2])
    return {
        j: JobMarks(
            hash((*common[j], *(emitted[j] if here.get(j) else ()))),
            hash((*common[j], None if here.get(j) else pending.get(j))),
        )
        for j in job_ids
    }


def nodes_mark(conn: Connection, liveness_ttl: float, span_grace: float, me: str) -> int:
    """The live nodes, the feeds each works and their localities; and which dead nodes' spans may move (past
    `span_grace`): a change of any moves every job's spans or rollout. The nodes' views of a feed are in its
    jobs' own marks (`job_marks`): each runner publishes its view as it starts, and 500 starting feeds would
    otherwise wake every job at nearly every look. Whether node `me` (the one looking) is live is left out:
    it is, as it looks. Its heartbeat late under load (the store would count it dead a moment) would otherwise
    wake every job it works at once, and load it more; what other nodes do about it (its spans moved, its
    leases taken) each job's own mark shows."""
    now = time.time()
    members = [
        (
            n.node_id,
            n.pid,
            n.locality,
            n.feeds,
            n.node_id == me or n.live(now, liveness_ttl),
            n.node_id != me and not n.live(now, liveness_ttl) and now - n.last_live(liveness_ttl) > span_grace,
        )
        for n in nodes.list_nodes(conn)
    ]
    return hash(tuple(members))
