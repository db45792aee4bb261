"""What a --follow node watches of the store for all the jobs it works (`node/watch.py`): a mark per job that
changes whenever something its coordinator or its spans on this node react to changes, each look in one
snapshot of four statements (`jobs.watched_rows`, `spans.owners_of`, `batch_intents.pending_counts`,
`nodes.views_of`). A job's own high-water mark, resolved timestamp and note are left out: they change at every
checkpoint, and only the coordinator that wrote them moves them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from feedctl.state import batch_intents, jobs, nodes, spans
from feedctl.state.many_rows import fold


@dataclass(frozen=True)
class JobMarks:
    """What a job's coordinator and its spans on a node react to, each as a hash; `emitted`, apart from the
    coordinator's, the batches the spans of other nodes emitted while this node coordinates the job (a steady
    job's node ticker takes them, without a step)."""

    coordinator: int
    spans: int
    emitted: int = 0


class WatchMarks:
    """What node `node_id` (whose leases `holder` holds) watches of its jobs, look after look (`marks`). Each of
    the four parts it reads (the jobs' rows, their spans, their pending batches, the nodes' views of their
    feeds) is folded by the store into one text, and taken apart again only when that text changed since the
    last look: an idle node of 1,000 jobs read 5,000 rows and hashed them at every poll, most of its idle work."""

    def __init__(self, node_id: str, holder: str):
        self.node_id, self.holder = node_id, holder
        self._job_ids: list[int] = []
        self._feeds: list[str] | None = None
        self._statements: dict[str, object] = {}
        self._folds: dict[str, str] = {}
        self._parts: dict[str, object] = {}
        self._marks: dict[int, JobMarks] = {}
        self._combined = True  # the marks are made of every part as last taken apart

    def marks(self, conn: Connection, job_ids: list[int]) -> dict[int, JobMarks]:
        """Per job, as this node sees it. Both marks hold the job's status, definition and lease (and whether
        the lease has expired), its spans' owners and hand-overs, and the nodes' views of its feed. While this
        node coordinates the job, `emitted` holds the batches the spans of other nodes emitted (this node's tell
        the coordinator themselves when they record theirs); while another may, the spans' mark adds the
        pending batches (a coordinator here wakes this node's spans itself when it cuts one). No mark then
        changes with what this node did alone."""
        job_ids = sorted(job_ids)
        if job_ids != self._job_ids:  # the statements built once for a set of jobs
            self._job_ids, self._folds, self._feeds = job_ids, {}, None
            self._statements = {
                "jobs": jobs.watched_rows(conn, job_ids, self.holder),
                "spans": spans.owners_of(conn, job_ids),
                "pending": batch_intents.pending_counts(conn, job_ids),
            }
        # A part taken apart stays to combine until the marks are made of it, even if a later part's read fails.
        self._combined &= not self._look(conn, "jobs", _jobs_part, {"now": time.time()})
        self._combined &= not self._look(conn, "spans", self._spans_part)
        self._combined &= not self._look(conn, "pending", _pending_part)
        feeds = sorted(set(self._parts["jobs"][1].values()))
        # The nodes' views of a job's feed: a view a node publishes (as its runner of the feed starts, or its copy
        # of the project changes) wakes that feed's jobs only, not every job of every node that looks.
        if feeds != self._feeds:
            self._feeds, self._statements["views"] = feeds, nodes.views_of(conn, feeds)
        self._combined &= not self._look(conn, "views", _views_part)
        if not self._combined:
            self._marks, self._combined = self._combine(), True
        return self._marks

    def _look(self, conn: Connection, part: str, read: Callable[[list], object], parameters=None) -> bool:
        """Whether the part changed since the last look: then it is taken apart again."""
        folded = fold(conn, self._statements[part], parameters)
        if self._folds.get(part) == folded.text:
            return False
        self._folds[part], self._parts[part] = folded.text, read(folded.rows())
        return True

    def _spans_part(self, rows: list) -> tuple[dict, dict]:
        """Per job, its spans' owners and hand-overs; and the batches the spans of other nodes emitted."""
        common: dict[int, list] = {}
        emitted: dict[int, list] = {}
        for r in rows:
            common.setdefault(r.job_id, []).append((r.table_name, r.span, r.node_id, r.moving_to))
            if r.node_id != self.node_id:
                emitted.setdefault(r.job_id, []).append((r.table_name, r.span, r.batch_seq))
        return common, emitted

    def _combine(self) -> dict[int, JobMarks]:
        (rows, feed_of), (spans, emitted) = self._parts["jobs"], self._parts["spans"]
        pending, views = self._parts["pending"], self._parts["views"]
        out = {}
        for j in self._job_ids:
            here, row = rows.get(j, (False, None))
            common = (row, *spans.get(j, ()), views.get(feed_of.get(j), ()))
            out[j] = JobMarks(
                hash(common),
                hash((*common, None if here else pending.get(j))),
                hash(tuple(emitted.get(j, ()))) if here else 0,
            )
        return out


def _jobs_part(rows: list) -> tuple[dict, dict]:
    """Per job, whether this node holds its lease and what both marks hold of its row; and each job's feed."""
    out, feed_of = {}, {}
    for r in rows:
        feed_of[r.job_id] = r.feed
        fields = (r.status, r.definition_hash, r.coordinator, r.lease_epoch, bool(r.expired), r.initial_scan_done)
        out[r.job_id] = (bool(r.here), fields)
    return out, feed_of


def _pending_part(rows: list) -> dict[int, tuple]:
    return {r.job_id: (r.batches, r.last) for r in rows}


def _views_part(rows: list) -> dict[str, tuple]:
    views: dict[str, list] = {}
    for r in rows:
        views.setdefault(r.feed, []).append((r.node_id, r.view, r.since))
    return {feed: tuple(v) for feed, v in views.items()}


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
