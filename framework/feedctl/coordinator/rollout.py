"""A project's change reaching a running job on several nodes. Each node publishes its *view* of each feed it
runs: a fingerprint of what its copy of the project says of the feed, as a job takes it (`job.view`). The job
records the view it runs and a revision number. Only the coordinator changes the job's definition, and only
once every live node working the feed holds the same view: the files of a deploy reach nodes at different
moments (project.yml first, a feed file later, one node last), and a node with an older or a half-deployed
copy must never record a drop, an add or a refusal, as CockroachDB finalizes a cluster version only once every
node runs it. A node whose copy cannot run what the job records (a table its project.yml does not declare, a
definition the job cannot take) stops working the feed and waits; the others go on.

`decide` is the coordinator's decision, a pure function of the views; `RollOut` carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.compiler.compile import CompiledFeed
from feedctl.coordinator import table_change
from feedctl.coordinator.job import RunError, Wanted, apply_in_place, check_definition, revision, view
from feedctl.project.model import Project
from feedctl.state import jobs, nodes
from feedctl.state.store import StateStore


@dataclass(frozen=True)
class Rollout:
    """What the coordinator does with its own view of the feed against the job's."""

    apply: bool  # record the coordinator's copy on the job now
    differing: tuple[str, ...] = ()  # the live nodes working the feed whose view is not the coordinator's

    def describe(self, job_revision: int) -> str:
        if self.apply or not self.differing:
            return ""
        return (f"keeps revision {job_revision} of its definition until every node running it has the same "
                f"project: {', '.join(self.differing)} {'has' if len(self.differing) == 1 else 'have'} another copy")


def decide(job_view: str | None, own_view: str, views: dict[str, str | None], own_node: str) -> Rollout:
    """`views`: the view of each live node working the feed (None: it has published none). The coordinator
    records its own copy when it differs from the job's and every such node holds it."""
    if own_view == job_view:
        return Rollout(apply=False)
    differing = tuple(sorted(n for n, v in views.items() if n != own_node and v != own_view))
    return Rollout(apply=not differing, differing=differing)


def check_runnable(job: jobs.Job, project: Project, compiled: CompiledFeed) -> None:
    """Raise RunError when this copy of the project cannot run the job as it records itself: a definition the
    job cannot take, or a table the job reads that its project.yml does not declare (an older copy, or one
    deployed in part)."""
    check_definition(job, compiled, project)
    missing = [t for t in table_change.ever(job.definition) if t not in project.tables]
    if missing:
        raise RunError(f"feed {compiled.feed.name}: its job {job.job_id} reads {', '.join(missing)}, which this "
                       f"node's project.yml does not declare (an older copy of the project, or one deployed in "
                       f"part?): this node leaves the job to the others until it does")


def publish(store: StateStore, node_id: str, project: Project, compiled: CompiledFeed, job: jobs.Job, log) -> None:
    """This node's view of the feed, for the job's coordinator to compare; said when it is not the job's."""
    mine = view(project, compiled)
    with store.transaction() as conn:
        nodes.publish_view(conn, node_id, compiled.feed.name, mine)
    if mine != job.definition.get("view"):
        log(f"{job.feed}: this node's copy of the project differs from revision {revision(job.definition)} of job "
            f"{job.job_id}; the job takes it once every node running it has it", event="rollout_pending",
            feed=job.feed, job_id=job.job_id)


class RollOut:
    """The coordinator's side: at each step, this node's copy recorded on the job when `decide` says so; the
    keys to cut tables under (those the copy declares once the job has it, else those the job records)."""

    def __init__(self, store: StateStore, job_id: int, feed: str, node_id: str, liveness_ttl: float, log):
        self.store, self.job_id, self.feed, self.node_id, self.ttl, self.log = store, job_id, feed, node_id, liveness_ttl, log
        self.said = ""  # what it waits for, said once

    def step(self, job: jobs.Job, wanted: Wanted, epoch: int) -> tuple[jobs.Job, dict[str, dict]]:
        with self.store.reading() as conn:
            views = nodes.views(conn, self.feed, self.ttl)
        decided = decide(job.definition.get("view"), wanted.view, views, self.node_id)
        waiting = decided.describe(revision(job.definition))
        if decided.apply:
            try:
                check_definition(job, wanted.compiled, wanted.project)  # else its runner refuses it, saying why
                job = apply_in_place(self.store, wanted.project, self.job_id, wanted.compiled, self.node_id, epoch,
                                     self.log)
            except RunError as exc:  # an added table that cannot be read: tried again at the next step
                waiting = str(exc)
        if waiting and waiting != self.said:
            self.log(f"{self.feed}: job {self.job_id} {waiting}", event="rollout_waits", feed=self.feed,
                     job_id=self.job_id, nodes=list(decided.differing))
        self.said = waiting
        keys = job.definition.get("keys") or {}
        declared = dict(wanted.declared) if job.definition.get("view") == wanted.view else \
            {t: keys.get(t, key) for t, key in wanted.declared.items()}
        return job, declared
