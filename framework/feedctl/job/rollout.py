"""A project's change reaching a running job on several nodes. Each node publishes its *view* of each feed it
runs: a fingerprint of what its copy of the project says of the feed, as a job takes it (`revision.view`). The job
records the view it runs and a revision number. Only the coordinator changes the job's definition, and only
once every live node working the feed holds the same view: the files of a deploy reach nodes at different
moments (project.yml first, a feed file later, one node last), and a node with an older or a half-deployed
copy must never record a drop, an add or a refusal, as CockroachDB finalizes a cluster version only once every
node runs it. Nor does it take a copy the nodes loaded before the job took its revision: a job made by
`run --new-job` from a copy no node has yet keeps it until they load a copy after it (the store's sequence
orders the two, not the nodes' clocks). A node whose copy cannot run what the job records (a table its
project.yml does not declare, a definition the job cannot take) stops working the feed and waits; the others
go on.

`decide` is the coordinator's decision, a pure function of the views; `RollOut` carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.compiler.compile import CompiledFeed
from feedctl.errors import RunError
from feedctl.job.definition import definition_of
from feedctl.job.key_change import Key
from feedctl.job.revision import Wanted, apply_in_place, check_definition, view
from feedctl.project.model import Project
from feedctl.state import jobs, nodes
from feedctl.state.store import StateStore


@dataclass(frozen=True)
class Copy:
    """A node's copy of the project, for one feed, and when the node loaded it: the store's sequence number
    then (`state/sequence.py`)."""

    project: Project
    compiled: CompiledFeed
    loaded: int


@dataclass(frozen=True)
class Rollout:
    """What the coordinator does with its own view of the feed against the job's."""

    apply: bool  # record the coordinator's copy on the job now
    differing: tuple[str, ...] = ()  # the live nodes working the feed whose view is not the coordinator's
    older: tuple[str, ...] = ()  # the nodes (the coordinator among them) that loaded it before the job's revision

    def describe(self, job_revision: int) -> str:
        if self.differing:
            return (
                f"keeps revision {job_revision} of its definition until every node running it has the same "
                f"project: {_nodes(self.differing)} another copy"
            )
        if self.older:
            one = len(self.older) == 1
            return (
                f"keeps revision {job_revision} of its definition, made from another copy of the project after "
                f"{', '.join(self.older)} loaded {'its' if one else 'theirs'}: it takes only a copy loaded after "
                f"it (deploy the job's copy to {'it' if one else 'them'}, or cancel the job and start a new one "
                f"from {'its' if one else 'theirs'})"
            )
        return ""


def _nodes(names: tuple[str, ...]) -> str:
    return f"{', '.join(names)} {'has' if len(names) == 1 else 'have'}"


def decide(
    job_view: str | None, job_since: int, own: nodes.View | None, views: dict[str, nodes.View | None], own_node: str
) -> Rollout:
    """`views`: the view of each live node working the feed (None: it has published none); `own`: the
    coordinator's (None: not published yet). The coordinator records its own copy when it differs from the
    job's, every such node holds it, and each of them loaded it after the job took its revision
    (`job_since`): the newest of a job's revision and the nodes' copies wins, whichever way a deploy and a
    `run --new-job` from another copy cross."""
    if own is None or own.view == job_view:
        return Rollout(apply=False)
    differing = tuple(sorted(n for n, v in views.items() if n != own_node and (v is None or v.view != own.view)))
    if differing:
        return Rollout(apply=False, differing=differing)
    older = tuple(sorted(n for n, v in {**views, own_node: own}.items() if v.since <= job_since))
    return Rollout(apply=not older, older=older)


def check_runnable(job: jobs.Job, project: Project, compiled: CompiledFeed) -> None:
    """Raise RunError when this copy of the project cannot run the job as it records itself: a definition the
    job cannot take, or a table the job reads that its project.yml does not declare (an older copy, or one
    deployed in part)."""
    check_definition(job, compiled, project)
    missing = [t for t in definition_of(job).tables_ever() if t not in project.tables]
    if missing:
        raise RunError(
            f"feed {compiled.feed.name}: its job {job.job_id} reads {', '.join(missing)}, which this "
            f"node's project.yml does not declare (an older copy of the project, or one deployed in "
            f"part?): this node leaves the job to the others until it does"
        )


def publish(store: StateStore, node_id: str, copy: Copy, job: jobs.Job, log) -> None:
    """This node's view of the feed, for the job's coordinator to compare; said when it is not the job's."""
    mine = view(copy.project, copy.compiled)
    with store.transaction() as conn:
        nodes.publish_view(conn, node_id, copy.compiled.feed.name, mine, copy.loaded)
    if mine != definition_of(job).view:
        log(
            f"{job.feed}: this node's copy of the project differs from revision {definition_of(job).revision} of job "
            f"{job.job_id}; the job takes it once every node running it has it",
            event="rollout_pending",
            feed=job.feed,
            job_id=job.job_id,
        )


class RollOut:
    """The coordinator's side: at each step, this node's copy recorded on the job when `decide` says so; the
    keys to cut tables under (those the copy declares once the job has it, else those the job records)."""

    def __init__(self, store: StateStore, job_id: int, feed: str, node_id: str, liveness_ttl: float, log):
        self.store, self.job_id, self.feed, self.node_id, self.ttl, self.log = (
            store,
            job_id,
            feed,
            node_id,
            liveness_ttl,
            log,
        )
        self.said = ""  # what it waits for, said once

    def step(self, job: jobs.Job, wanted: Wanted, epoch: int) -> tuple[jobs.Job, dict[str, Key]]:
        with self.store.reading() as conn:
            views = nodes.views(conn, self.feed, self.ttl)
            own = nodes.view_of(conn, self.node_id, self.feed)
        if own is not None and own.view != wanted.view:  # published as this step began: looked at next step
            own = None
        decided = decide(definition_of(job).view, definition_of(job).view_since, own, views, self.node_id)
        waiting = decided.describe(definition_of(job).revision)
        if decided.apply:
            try:
                check_definition(job, wanted.compiled, wanted.project)  # else its runner refuses it, saying why
                job = apply_in_place(
                    self.store, wanted.project, self.job_id, wanted.compiled, self.node_id, epoch, self.log
                )
            except RunError as exc:  # an added table that cannot be read: tried again at the next step
                waiting = str(exc)
        if waiting and waiting != self.said:
            self.log(
                f"{self.feed}: job {self.job_id} {waiting}",
                event="rollout_waits",
                feed=self.feed,
                job_id=self.job_id,
                nodes=list(decided.differing or decided.older),
            )
        self.said = waiting
        declared = (
            dict(wanted.declared)
            if definition_of(job).view == wanted.view
            else definition_of(job).keys_in_force(wanted.declared)
        )
        return job, declared
