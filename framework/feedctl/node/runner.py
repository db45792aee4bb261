"""One feed's job on this node: find or create the job, coordinate it while this node holds its lease
(`job_coordinator`), and have this node's spans emit each batch the coordinator cuts (`emitter`), in the
node's own Spark session; take the changes of the project that the job takes in place (`take`).

A run is a generator of steps (`runs`): on a --follow node its turns are taken by the node's pool of workers
(`node/scheduler.py`), never by a thread of its own; `run` drives it on the caller's thread.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from threading import Event

from feedctl.compiler.compile import CompiledFeed
from feedctl.compiler.read_plan import Pushdown
from feedctl.coordinator import following, locality
from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.hand_off import HandOff
from feedctl.coordinator.job_coordinator import JobCoordinator
from feedctl.coordinator.steady import LOOK_AGAIN
from feedctl.coordinator.wait import Stepping, Wait, Wake, drive
from feedctl.errors import RetryLater, RunError
from feedctl.job import rollout, table_change
from feedctl.job.definition import definition_of
from feedctl.job.refusals import not_runnable
from feedctl.job.revision import Wanted, declared_keys, view
from feedctl.job.start import create_job, starting, stopped
from feedctl.node.emitter import SpanEmitter, feed_plan, job_now
from feedctl.node.settings import RunOutcome, RunReport, RunSettings
from feedctl.node.shared import Shared
from feedctl.project.model import Project
from feedctl.sinks.registry import open_sink
from feedctl.sinks.versioned import at_version
from feedctl.source.delta import of_table
from feedctl.source.stage_ahead import StageAhead
from feedctl.spark import session
from feedctl.state import jobs, nodes, sequence
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore
from feedctl.units import parse_timestamp


class JobRunner:
    def __init__(
        self,
        project: Project,
        compiled: CompiledFeed,
        store: StateStore,
        settings: RunSettings,
        stop: Event | None = None,
        log=lambda message, **fields: None,
        spark_factory=None,
        loaded: int | None = None,
        shared: Shared | None = None,
        earlier: int | None = None,
    ):
        """`loaded`: the store's sequence number when this node loaded `project` (None: now); `shared`: what
        the node's feeds share (None: this runner's own Spark jobs; it polls and renews its lease alone);
        `earlier`: the job of an earlier contract version of the feed this runner runs, from its own
        definition (`job/earlier_version.py`), rather than the job of the version `compiled` defines."""
        if settings.node_id is None:  # a runner outside `run` (tail, tests): a node of its own
            settings = replace(settings, node_id=nodes.process_node_id())
        self.store, self.settings = store, settings
        self.stop = stop or Event()
        self.log = log
        self.spark_factory = spark_factory
        self.spark = session.Starting(spark_factory or (lambda: session.spark_session(project.spark)))
        self.shared = shared or Shared()
        self.earlier = earlier
        self.left_version = False  # the project's version of the feed is another now (`leave_version`)
        # Wakes the feed's steps (`runs`): a batch cut, spans placed, the node's watch, the coordinator's turns
        # over, the feed halted. It is the coordinator's `cut`.
        self.wake = Wake()
        self._take(project, compiled, loaded if loaded is not None else loaded_now(store))

    @property
    def label(self) -> str:
        """The feed, and the contract version it runs past the first (`orders@v2`)."""
        return jobs.version_label(self.feed.name, self.feed.version)

    def leave_version(self) -> None:
        """The project defines another version of the feed: this runner's job is another version's from now
        on, and runs on as it is until canceled, taking no change of the project; a runner without a job
        runs none (the node runs the new version's job with a runner of its own)."""
        self.left_version = True
        if self.job_id is not None:
            self.earlier = self.job_id

    def _take(self, project: Project, compiled: CompiledFeed, loaded: int) -> None:
        """What this runner knows of its feed, from a copy of the project loaded at `loaded`."""
        self.project, self.compiled = project, compiled
        self.feed = compiled.feed
        self.options = compiled.options
        self._retrying: Retrying | None = None  # once the job is known: how its steps are tried again
        self.sink_def = at_version(project.sinks[self.feed.sink], self.feed.version)
        self.sink = open_sink(self.sink_def.uri, self.sink_def.options, str(project.root))
        self.sources = {t: of_table(t, project.tables[t]) for t in compiled.tables}
        self.declared = declared_keys(project, compiled.tables)
        self.job_id, self.coordinator = None, None  # once the job is known, and coordinated here
        self.emitter: SpanEmitter | None = None  # once the job is known: this node's spans of it
        self.refused = ""  # the project changed under this --follow node into a definition the job cannot take
        self.latest = rollout.Copy(project, compiled, loaded)
        self.end_time = (
            parse_timestamp(self.options.end_time, allow_version=False).hlc if self.options.end_time else None
        )

    def run(self) -> RunReport:
        """Run the feed's job on this node, on this thread (`runs`)."""
        return drive(self.runs())

    def runs(self) -> Stepping[RunReport]:
        """Run the feed's job on this node, step by step, yielding where it waits. When the job's tables change
        under it (another node's `run` added one this runner has no source for), it runs again with this node's
        copy of the project as last taken, in the same Spark session, as a node restarted would."""
        before = None
        while True:
            report, rejoin = yield from self._run()
            if before is not None:
                report.batches += before.batches
                report.messages += before.messages
                report.files += before.files
            if not rejoin:
                return report
            before, copy = report, self.latest
            self.log(f"{self.feed.name}: the job's tables changed; starting again", event="rejoin", feed=self.feed.name)
            self._take(copy.project, copy.compiled, copy.loaded)

    def _run(self) -> Stepping[tuple[RunReport, bool]]:
        """This node's run of the job, and whether it is to run again (`table_change.Rejoin`). On a --follow
        node, its start waits its turn among the node's feeds (`Shared.starting`)."""
        with ExitStack() as turn:
            turn.enter_context(self.shared.starting)
            return (yield from self._started(turn))

    def _started(self, turn: ExitStack) -> Stepping[tuple[RunReport, bool]]:
        """`_run`, which lets the node's next feed start (`turn.close()`) once the job's work begins."""
        problem = not_runnable(self.options, self.sink.KIND, self.sink.options)
        if problem:
            raise RunError(f"feed {self.feed.name}: {problem}")
        with self.store.reading() as conn:
            if self.earlier is not None:
                job = jobs.get_job(conn, self.earlier)
            else:
                job = jobs.newest_job(conn, self.feed.name, self.feed.version)
        created = self.earlier is None and (
            job is None or (job.status in (JobStatus.CANCELED, JobStatus.FAILED) and self.settings.new_job)
        )
        if created:
            job = create_job(
                self.project,
                starting(self.compiled, self.settings, job, self.sink),
                self.sources,
                self.store,
                self.sink,
                self.log,
                self.settings.scan_tables,
            )
        elif self.settings.cursor or self.settings.continue_job:
            raise RunError(
                f"feed {self.feed.name}: --cursor and --continue start a new job, and its job "
                f"{job.job_id} is {job.status}" + ("" if job.status in jobs.ACTIVE else "; add --new-job")
            )
        self.job_id = job.job_id
        report = RunReport(self.label, job.job_id, job.status, high_water=job.high_water, resolved=job.resolved)
        if job.status != JobStatus.RUNNING:
            report.note, report.error = stopped(job)
            return report, False
        if self.earlier is None:  # an earlier version's job takes no change of the project
            rollout.publish(self.store, self.settings.node_id, self.latest, job, self.log)
        try:  # a copy of the project the job cannot run: this node leaves the job to the others, and says why
            rollout.check_runnable(job, self.project, self.compiled)
        except RunError as exc:
            self._refuse(exc)
            raise
        self.sources = {
            t: self.sources.get(t) or of_table(t, self.project.tables[t]) for t in definition_of(job).tables_ever()
        }
        self.declared = declared_keys(self.project, list(self.sources))
        # The job's options from here on: where it started is its own (the feed's cursor may have been removed
        # since, or never set), and in-place options are those it records, whichever copy of the project set them.
        self.options = definition_of(job).options
        # A table of the job that this node's feed file does not list yet is read whole, as a plain feed reads.
        pushdown = {t: self.compiled.pushdown.get(t) or Pushdown(columns=None) for t in self.sources}
        self.compiled = replace(self.compiled, options=self.options, pushdown=pushdown)
        wanted = self.options.execution_locality
        if wanted and not locality.matches(wanted, self.settings.locality):
            turn.close()
            yield from HandOff(
                self.store, job.job_id, self.feed.name, wanted, self.settings.locality, self.settings, self.log
            ).serve(self.stop, report)
            return report, False
        backoff = Backoff(
            self.settings.retry_backoff, self.settings.max_backoff, lambda: job_now(self.store, job.job_id).high_water
        )
        self._retrying = Retrying(
            self.feed.name,
            self.settings.node_id,
            self.settings.retries,
            backoff,
            self.spark,
            self.project.spark,
            self.stop,
            lambda: self.options,
            self.log,
            outages_last=self.settings.follow,
            status=partial(self._running_status, job.job_id),
            store_outage=self.shared.store_outage,
        )
        homes = {t: self.project.tables[t].locality for t in self.sources}
        coordinator = self.coordinator = JobCoordinator(
            self.store,
            job,
            self.settings,
            self.compiled,
            self.sources,
            homes,
            self.declared,
            self.sink,
            self.end_time,
            report,
            self.log,
            self._retrying,
            cut=self.wake,
        )
        coordinator.wanted = self._wanted(self.latest.project, self.latest.compiled)
        if self.earlier is not None:  # the job's own view: its coordinator never records another
            coordinator.wanted = replace(coordinator.wanted, view=definition_of(job).view)
        emitter = self.emitter = SpanEmitter(
            self.store,
            self.settings,
            job,
            report,
            self.feed.name,
            self.project,
            feed_plan(
                self.store,
                job,
                self.project,
                self.compiled,
                self.sources,
                self.sink,
                self.settings.node_id,
                self.shared,
            ),
            self.declared,
            self.end_time,
            self.spark,
            self.shared,
            self._retrying,
            self.stop,
            self.log,
        )
        ahead, rejoin = StageAhead(emitter.plan.stager), False
        turn.close()
        try:
            if self.settings.follow:
                yield from self._follow(job, coordinator, emitter, ahead)
            else:
                self._once(job, coordinator, emitter, ahead, report, created)
        except table_change.Rejoin:
            rejoin = True
        finally:
            ahead.close()
        if self.refused:  # said on the job once this node's coordinator, which checkpoints, has stopped
            self._refuse(self.refused)
            report.status, report.note, report.error = RunOutcome.ERROR, self.refused, self.refused
        return report, rejoin and not self.refused

    def again(self, settings: RunSettings) -> JobRunner:
        """A runner of the same feed on this node, with its copy of the project as last taken, for the next
        job it runs (or the same job once more), in the same Spark session."""
        copy = self.latest
        runner = JobRunner(
            copy.project,
            copy.compiled,
            self.store,
            settings,
            Event(),
            self.log,
            self.spark_factory,
            copy.loaded,
            self.shared,
        )
        runner.spark, runner.wake = self.spark, self.wake  # the feed's steps go on with the same wake
        return runner

    def take(self, project: Project, compiled: CompiledFeed | None, loaded: int) -> None:
        """The project changed under this --follow node. What the job takes of it in place (options, tables,
        descriptions, keys) its coordinator records once every node running the feed has the same copy
        (`rollout`); until then every node emits what the job records. A copy with which this node cannot run
        the job (a definition the job cannot take, a table it reads that project.yml does not declare, the feed
        gone) stops the job on this node, saying why; the node runs it again once its copy changes. `loaded`: the
        store's sequence number when the node loaded `project` (`loaded_now`)."""
        if self.earlier is not None or self.left_version:
            return
        if compiled is not None and compiled.feed.version != self.feed.version:
            self.leave_version()  # the node runs the new version's job beside it (`commands/run.py`)
            return
        if compiled is not None:
            self.latest = rollout.Copy(project, compiled, loaded)
        if self.job_id is None or self.stop.is_set():
            return
        job = job_now(self.store, self.job_id)
        if job.status != JobStatus.RUNNING:
            return
        try:
            if compiled is None:
                raise RunError(
                    f"feed {self.feed.name} is no longer in this node's project; its job {job.job_id} "
                    f"runs on nodes whose project still has it, until canceled "
                    f"(`feedctl cancel {job.job_id}`)"
                )
            rollout.check_runnable(job, project, compiled)
        except RunError as exc:
            self.refused = str(exc)
            self.halt()
            return
        rollout.publish(self.store, self.settings.node_id, self.latest, job, self.log)
        wanted = self._wanted(project, compiled)
        self.declared = wanted.declared
        if self.emitter is not None:
            self.emitter.declared = wanted.declared
        if self.coordinator is not None:
            self.coordinator.wanted = wanted
            self.coordinator.wake.set()

    def _wanted(self, project: Project, compiled: CompiledFeed) -> Wanted:
        return Wanted(
            project,
            compiled,
            view(project, compiled),
            declared_keys(project, [t for t in self.sources if t in project.tables]),
        )

    def _running_status(self, job_id: int, text: str) -> None:
        """What `feedctl jobs` says the job is doing, while an outage lasts and once it is over."""
        with self.store.transaction() as conn:
            jobs.set_note(conn, job_id, text)

    def _refuse(self, exc: RunError | str) -> None:
        """Seen in `feedctl jobs` too: the job's high-water mark stops here unless another node runs it."""
        with self.store.transaction() as conn:
            jobs.set_note(conn, self.job_id, f"refused by node {self.settings.node_id}: {exc}")

    def _once(
        self, job, coordinator: JobCoordinator, emitter: SpanEmitter, ahead: StageAhead, report, created: bool
    ) -> None:
        """A one-off run coordinates the job and emits its spans until every batch due is emitted; it leaves
        the job to another live node coordinating it, and a job it created to the --follow nodes working the
        feed, which take it up within their poll interval."""
        with self.store.reading() as conn:
            following = sorted(nodes.working(conn, self.feed.name, self.settings.liveness_ttl)[0]) if created else []
        if following:
            report.note = f"run by the --follow {'node' if len(following) == 1 else 'nodes'} {', '.join(following)}"
            return
        coordinator.epoch = coordinator.claim()
        if coordinator.epoch is None:
            report.note = f"coordinated by {nodes.node_of(job.coordinator)}, a live node"
            return
        try:
            with coordinator.heartbeat() as beat:
                while not self.stop.is_set():
                    if beat.lost.is_set():
                        raise jobs.LeaseLost(f"job {job.job_id}: another runner took the lease")
                    if not emitter.running() or coordinator.step():
                        return
                    if not emitter.emit(ahead):
                        if coordinator.idle:
                            return
                        self.stop.wait(self.settings.poll_interval)  # other nodes' spans have a batch to emit
        except jobs.LeaseLost as exc:
            report.note = f"stopped: {exc}"
        except jobs.NotRunning as exc:
            report.status, report.note = exc.status, str(exc)
        finally:
            coordinator.release()

    @property
    def backfilling(self) -> bool:
        """Emitting a scan or a backfill now (a metric)."""
        return self.emitter is not None and self.emitter.backfilling

    @property
    def history_headroom(self) -> float | None:
        """The job's least history headroom, where this node coordinates it (a metric)."""
        coordinator = self.coordinator
        if coordinator is None or coordinator.epoch is None:
            return None
        return coordinator.history.least()

    def halt(self) -> None:
        """Stop this feed's work on the node, waking its steps and its coordinator."""
        self.stop.set()
        self.wake.set()
        if self.coordinator is not None:
            self.coordinator.wake.set()

    def _follow(self, job, coordinator: JobCoordinator, emitter: SpanEmitter, ahead: StageAhead) -> Stepping[None]:
        """A --follow node emits its spans of the job while the job runs; its coordinator takes turns on the
        node's scheduler, coordinating whenever the job's lease is free to this node (`following.Turns`).
        Both wait while the job is quiet, until the node's watch wakes them; their retries wait for a later
        turn rather than sleeping on a worker (`Retrying.later`)."""
        done, stop = threading.Event(), threading.Event()
        coordinator.retrying, emitter.retrying = self._retrying.later(), self._retrying.later()
        coordinator.leases, coordinator.looks, coordinator.takes = (
            self.shared.leases,
            self.shared.looks,
            self.shared.takes,
        )
        coordinator.ticker = self.shared.ticker
        if self.shared.watch is not None:
            coordinator.watched, coordinator.newest, coordinator.logs = (
                True,
                self.shared.watch.newest,
                self.shared.watch.log,
            )
            self.shared.watch.add(
                job.job_id,
                self.sources,
                coordinator.wake,
                coordinator.cut,
                coordinator.table_moved,
                coordinator.batch_emitted,
            )
        turns = self.shared.scheduler.add(
            following.Turns(coordinator, stop, done), coordinator.wake, then=self.wake.set
        )
        error = None
        try:
            yield from self._emits(coordinator, emitter, ahead, done, turns.over)
        except Exception as exc:  # raised once the coordinator's turns are over
            error = exc
        finally:
            if self.shared.watch is not None:
                self.shared.watch.remove(job.job_id)
            stop.set()
            coordinator.wake.set()
        while True:
            self.wake.clear()
            if turns.over.is_set():
                break
            yield Wait(LOOK_AGAIN, self.wake)  # set once they are (`then`)
        coordinator.wake.on_set = None
        if error is not None:
            raise error
        if coordinator.error is not None:
            raise coordinator.error
        if done.is_set():  # the coordinator saw the job end first: the report says how it ended
            emitter.running()

    def _emits(
        self,
        coordinator: JobCoordinator,
        emitter: SpanEmitter,
        ahead: StageAhead,
        done: threading.Event,
        over: threading.Event,
    ) -> Stepping[None]:
        """This node's spans emit batch after batch while the job runs, letting the node's other feeds take
        their turns between batches; with none to emit, they wait until woken (`wake`). A wait a retry asks
        for (a sink away, the store busy) is not shortened by a wake."""
        not_before = 0.0
        while not self.stop.is_set() and not done.is_set() and not over.is_set():
            left = not_before - time.monotonic()
            if left > 0:
                yield Wait(left, self.stop)
                continue
            self.wake.clear()
            try:
                emitted = yield from emitter.emitting(ahead)
            except RetryLater as later:
                not_before = time.monotonic() + later.wait
                continue
            except Exception as exc:
                wait = self._retrying.store_wait(exc)
                if wait is None:
                    raise
                not_before = time.monotonic() + wait
                continue
            if emitted is None:  # the job no longer runs
                return
            self._retrying.store_outage.worked()
            if emitted:
                coordinator.batch_emitted()
                yield Wait(0.0, self.wake)
            else:
                yield Wait(LOOK_AGAIN if coordinator.watched else self.settings.poll_interval, self.wake)


def loaded_now(store: StateStore) -> int:
    """The store's sequence number for a copy of the project loaded now: one for all the feeds of a load."""
    with store.transaction() as conn:
        return sequence.tick(conn)
