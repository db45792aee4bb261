"""A --follow node's feeds, supervised: each feed's version runs its job on this node (`JobRunner`), and when a
run ends the node waits until the feed has work for it again (a new job, the job resumed, a new copy of the
project), then runs it again; a feed's new version found in a changed project starts beside the one before.
A one-off `run` runs each feed once (`run_one`). The node drains when asked to stop, or when another process
took its id.

Each feed is a generator of steps (`Supervisor._work`, through `JobRunner.runs`) whose turns the node's pool
of feed workers takes (`Shared.feeds`): no thread of its own waits while the feed is quiet."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import replace

from feedctl.compiler.compile import CompiledFeed
from feedctl.coordinator.failure import store_failure
from feedctl.coordinator.store_outage import StoreOutage
from feedctl.coordinator.wait import Stepping, drive, pause
from feedctl.diagnostics import first_line
from feedctl.errors import RunError
from feedctl.node.membership import Membership
from feedctl.node.project_watch import ProjectWatch
from feedctl.node.runner import JobRunner, loaded_now
from feedctl.node.scheduler import Scheduled, Scheduler, Steps
from feedctl.node.settings import RunOutcome, RunReport, RunSettings
from feedctl.project.model import Project
from feedctl.state import jobs, nodes, spans
from feedctl.state.jobs import JobStatus
from feedctl.state.store import STORE_ERRORS, StateStore

JOIN_EVERY = 0.2  # seconds between the supervisor's looks at its stop, its identity and the project


class Supervisor:
    """`make_runner(project, compiled, stop=..., loaded=...)`: a runner of a feed's version that a changed
    project brings; `feeds`: the workers taking the feeds' steps."""

    def __init__(
        self,
        store: StateStore,
        node: Membership,
        settings: RunSettings,
        stop: threading.Event,
        outage: StoreOutage,
        project_watch: ProjectWatch,
        make_runner: Callable[..., JobRunner],
        feeds: Scheduler,
        log,
    ):
        self.store, self.node, self.settings, self.stop, self.outage = store, node, settings, stop, outage
        self.project_watch, self.make_runner, self.feeds, self.log = project_watch, make_runner, feeds, log
        self.current: dict[str, JobRunner] = {}  # each feed version's runner now (`orders`, `orders@v2`)
        self.reports: dict[str, RunReport] = {}  # each label's last run's report
        self.ended: set[str] = set()  # labels of runners of other versions' jobs that ended: they may start again
        self._feeds: list[tuple[str, Steps, Scheduled]] = []
        self._again = replace(settings, new_job=False, cursor=None, continue_job=False, rescan=False)

    def serve(self, runners: list[JobRunner]) -> list[RunReport]:
        """Run the feeds until the node stops; each label's last report, in the order the feeds started."""
        for runner in sorted(runners, key=lambda r: turn(self.node.node.node_id, r.label)):
            self._start(runner)
        draining = False
        for label, steps, feed in self._feeds:  # a feed's new version, started below, joins the list
            while not feed.over.is_set():
                if self.node.lost.is_set():  # another process took this node's id: stop acting as it
                    self.stop.set()
                if self.stop.is_set() and not draining:
                    draining = True
                    self.log(
                        "draining: this node's spans and leases go to the other nodes at their next step",
                        event="drain",
                        node=self.node.node.node_id,
                    )
                if self.stop.is_set():
                    for runner in self.current.values():
                        runner.halt()
                else:
                    live = [r for label, r in self.current.items() if label not in self.ended]
                    for project, compiled, at in take(self.project_watch.poll(), live, self.store, self.log):
                        self._start(self.make_runner(project, compiled, stop=threading.Event(), loaded=at))
                feed.over.wait(JOIN_EVERY)
            if steps.error is not None:  # never expected: the feed's steps ended on it, the node's others go on
                self.log(
                    f"{label}: stopped on this node: {type(steps.error).__name__}: {first_line(steps.error)}",
                    event="feed_stopped",
                    feed=label,
                    error=first_line(steps.error),
                )
        return [self.reports[label] for label in self.current if label in self.reports]

    def _start(self, runner: JobRunner) -> None:
        self.ended.discard(runner.label)
        self.current[runner.label] = runner
        steps = Steps(self._work(runner))
        self._feeds.append((runner.label, steps, self.feeds.add(steps, runner.wake)))

    def _retried(self, step, label: str) -> Stepping[object]:
        return store_step(step, label, self.stop, self.outage)

    def _work(self, runner: JobRunner) -> Stepping[None]:
        """Run the feed's job, then again whenever the feed has work for this node, until the node stops."""
        name, feed = runner.label, runner.feed.name
        while True:
            report = self.reports[name] = yield from runs(runner)
            if report.status == RunOutcome.ERROR:  # said at once, not when the node stops
                self.log(
                    f"{name}: not run on this node: {report.error}",
                    event="feed_refused",
                    feed=name,
                    error=report.error,
                )
            # its spans are placed elsewhere at the coordinator's next step
            yield from self._retried(lambda: leave(self.store, self.node, runner, report), name)
            if runner.earlier is not None or runner.left_version:  # another version's job runs once
                self.ended.add(name)
                return
            waited = yield from wait_for_work(
                self.store, runner, report, self.stop, self.settings.poll_interval, self.outage
            )
            if not waited:
                if runner.left_version:
                    self.ended.add(name)
                return
            runner = self.current[name] = runner.again(self._again)
            job = yield from self._retried(lambda: start_working(self.store, self.node, runner), name)
            if self.stop.is_set():
                return
            if job is not None and job.job_id != report.job_id:
                self.log(
                    f"{name}: job {job.job_id} runs; this node takes its part in it",
                    event="job_adopted",
                    feed=feed,
                    job_id=job.job_id,
                )


def turn(node_id: str, label: str) -> bytes:
    """Where a feed comes in the order a --follow node starts its feeds (a few at a time, `Shared.starting`):
    an order of each node's own. Nodes starting together in one order raced to make each feed's job, two of
    three makes refused, and their coordinators to claim it; in orders of their own, each feed's job is made,
    and its lease claimed, by whichever node reaches it first, a third of them each."""
    return hashlib.sha256(f"{node_id}/{label}".encode()).digest()


def run_one(runner: JobRunner) -> RunReport:
    """One run of a feed's job on this node, on this thread, its report whatever happened."""
    return drive(runs(runner))


def runs(runner: JobRunner) -> Stepping[RunReport]:
    """One run of a feed's job on this node, step by step, its report whatever happened."""
    try:
        return (yield from runner.runs())
    except RunError as exc:
        return RunReport(runner.label, None, RunOutcome.ERROR, note=str(exc), error=str(exc))
    except STORE_ERRORS as exc:  # busy or away while the job started (many feeds starting at once on SQLite)
        text = store_failure(exc)
        return RunReport(runner.label, None, RunOutcome.STORE_UNAVAILABLE, note=text, error=text)
    except Exception as exc:  # never lose one feed's report, nor stop the others, over an unexpected error
        text = f"{type(exc).__name__}: {first_line(exc)}"
        return RunReport(runner.label, None, RunOutcome.ERROR, note=text, error=text)


def wait_for_work(
    store: StateStore,
    runner: JobRunner,
    report: RunReport,
    stop: threading.Event,
    poll_interval: float,
    outage: StoreOutage,
) -> Stepping[bool]:
    """A --follow node whose run of a feed's job ended waits until `runs_again` says so. False once the node
    stops. A run the store failed runs again after the store's wait (`StoreOutage`), as does a look at the
    job the store fails."""
    if report.status == RunOutcome.STORE_UNAVAILABLE:  # run again once the store's wait is over
        return (yield from pause(outage.failed(runner.label, report.error), stop))
    seen, ran = runner.latest, runner.job_id
    feed, version = runner.feed.name, runner.feed.version

    def newest() -> jobs.Job | None:
        with store.reading() as conn:
            return jobs.newest_job(conn, feed, version)

    if ran is None:  # refused before it looked at a job: a job made from now on is new
        ran = getattr((yield from store_step(newest, runner.label, stop, outage)), "job_id", None)
    while (yield from pause(poll_interval, stop)):
        if runner.left_version:  # the project's version of the feed is another: its own runner runs it
            return False
        job = yield from store_step(newest, runner.label, stop, outage)
        if runs_again(job, ran, report.status == RunOutcome.ERROR, runner.latest is not seen):
            return True
    return False


def runs_again(job: jobs.Job | None, ran: int | None, refused: bool, copy_changed: bool) -> bool:
    """Whether a --follow node runs its feed again, after its run of job `ran` ended: when the feed's newest
    `job` runs and this node can take its part, that is, another job (made by `run --new-job`), or the same
    one unless this node refused it (its project's copy could not run it) and still has that copy. A job
    paused and resumed is run again however the run saw it end: the run may have ended as its coordinator
    saw the pause, before the node looked at the job's status, and the spans it holds would stand still.
    With no job, a new copy of the project may make one."""
    if job is None:
        return copy_changed
    if job.status != JobStatus.RUNNING:
        return False
    return job.job_id != ran or not refused or copy_changed


def leave(store: StateStore, node: Membership, runner: JobRunner, report: RunReport | None) -> None:
    """A run of a feed's job on this node ended: its spans are placed elsewhere at the coordinator's next
    step; a feed this node refused (or failed to start) is not worked here until its copy changes."""
    with store.transaction() as conn:
        if report is not None and report.job_id is not None and not node.lost.is_set():
            spans.boundary(conn, node.node.node_id, report.job_id, release=True)
        refused = report is None or report.status == RunOutcome.ERROR
        if refused and runner.earlier is None:
            nodes.stop_working(conn, node.node, runner.feed.name)


def start_working(store: StateStore, node: Membership, runner: JobRunner) -> jobs.Job | None:
    """This node works the feed again: the feed's newest job, which it takes its part in."""
    with store.transaction() as conn:
        nodes.start_working(conn, node.node, runner.feed.name)
        return jobs.newest_job(conn, runner.feed.name, runner.feed.version)


def store_step(step, label: str, stop: threading.Event, outage: StoreOutage) -> Stepping[object]:
    """`step()`, a store step of a --follow node's work on one feed between its runs, tried again while the
    store is busy or away (`StoreOutage`) rather than ending the feed's steps, which would leave the feed
    unrun on the node: 500 feeds starting at once on SQLite waited past the pool's timeout for a connection.
    None once the node stops (a node leaving releases all its spans itself)."""
    while True:
        try:
            done = step()
        except Exception as exc:
            cause = store_failure(exc)
            if not cause:
                raise
            if not (yield from pause(outage.failed(label, cause), stop)):
                return None
            continue
        outage.worked()
        return done


def take(changed, runners: list[JobRunner], store: StateStore, log) -> list[tuple[Project, CompiledFeed, int]]:
    """The project changed under this --follow node (`changed`; None: it did not). Returns the feeds whose
    version is new to the node, with when the node loaded them: it runs their jobs beside those of the versions
    before (`runner.take`)."""
    if changed is None:
        return []
    loaded = loaded_now(store)
    for runner in runners:
        runner.take(changed.project, changed.feeds.get(runner.feed.name), loaded)
    versions = {(r.feed.name, r.feed.version) for r in runners}  # one runner of a job on a node, at most
    feeds = {r.feed.name for r in runners}
    new = []
    for name, compiled in sorted(changed.feeds.items()):
        if compiled.feed.sink is None:
            continue
        if name not in feeds:
            log(f"{name}: new in the project; a node started with it runs it", event="feed_added", feed=name)
        elif (name, compiled.feed.version) not in versions:
            log(
                f"{name}: version {compiled.feed.version} is new; its job runs beside the version before",
                event="feed_version_added",
                feed=name,
                version=compiled.feed.version,
            )
            new.append((changed.project, compiled, loaded))
    return new
