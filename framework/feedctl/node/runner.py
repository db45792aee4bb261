"""One feed's job on this node: find or create the job, coordinate it while this node holds its lease
(`job_coordinator`), and emit this node's spans of each batch the coordinator cuts, recording their
frontiers: CockroachDB's change aggregator, in the node's own Spark session.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from functools import partial, reduce
from threading import Event

from feedctl.compiler.compile import CompiledFeed
from feedctl.compiler.read_plan import Pushdown
from feedctl.coordinator import following, locality
from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.frontier import Frontier
from feedctl.coordinator.hand_off import HandOff
from feedctl.coordinator.job_coordinator import JobCoordinator
from feedctl.coordinator.steady import LOOK_AGAIN
from feedctl.errors import ErrorKind, RunError
from feedctl.job import rollout, table_change
from feedctl.job.refusals import not_runnable
from feedctl.job.revision import Wanted, declared_keys, view
from feedctl.job.start import create_job, starting, stopped
from feedctl.node import emitted_batch
from feedctl.node.batch_progress import BatchProgress, batches_text
from feedctl.node.execute import BatchResult, FeedPlan, execute
from feedctl.node.settings import RunReport, RunSettings
from feedctl.node.share import hands_over, next_batch
from feedctl.node.shared import Shared
from feedctl.project.model import Project
from feedctl.sinks.registry import open_sink
from feedctl.sinks.versioned import at_version
from feedctl.source.delta import of_table
from feedctl.source.stage import Stager
from feedctl.source.stage_ahead import StageAhead
from feedctl.source.staging_area import StagingArea
from feedctl.spark import session
from feedctl.state import emit_reads, emit_writes, jobs, nodes, progress, sequence, spans
from feedctl.state.emit_reads import Pending
from feedctl.state.emit_writes import Emitted
from feedctl.state.jobs import JobError, JobStatus
from feedctl.state.progress import IntentKind
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
        self._take(project, compiled, loaded if loaded is not None else _now(store))

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
        self.backfilling = False  # emitting a scan or a backfill now (a metric)
        self.refused = ""  # the project changed under this --follow node into a definition the job cannot take
        self.latest = rollout.Copy(project, compiled, loaded)
        self.end_time = (
            parse_timestamp(self.options.end_time, allow_version=False).hlc if self.options.end_time else None
        )

    def run(self) -> RunReport:
        """Run the feed's job on this node. When the job's tables change under it (another node's `run` added
        one this runner has no source for), it runs again with this node's copy of the project as last taken,
        in the same Spark session, as a node restarted would."""
        before = None
        while True:
            report, rejoin = self._run()
            if before is not None:
                report.batches += before.batches
                report.messages += before.messages
                report.files += before.files
            if not rejoin:
                return report
            before, copy = report, self.latest
            self.log(f"{self.feed.name}: the job's tables changed; starting again", event="rejoin", feed=self.feed.name)
            self._take(copy.project, copy.compiled, copy.loaded)

    def _run(self) -> tuple[RunReport, bool]:
        """This node's run of the job, and whether it is to run again (`table_change.Rejoin`)."""
        problem = not_runnable(self.options, self.sink.KIND, self.sink.options)
        if problem:
            raise RunError(f"feed {self.feed.name}: {problem}")
        with self.store.transaction() as conn:
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
            t: self.sources.get(t) or of_table(t, self.project.tables[t]) for t in job.definition.tables_ever()
        }
        self.declared = declared_keys(self.project, list(self.sources))
        # The job's options from here on: where it started is its own (the feed's cursor may have been removed
        # since, or never set), and in-place options are those it records, whichever copy of the project set them.
        self.options = job.definition.options
        # A table of the job that this node's feed file does not list yet is read whole, as a plain feed reads.
        pushdown = {t: self.compiled.pushdown.get(t) or Pushdown(columns=None) for t in self.sources}
        self.compiled = replace(self.compiled, options=self.options, pushdown=pushdown)
        wanted = self.options.execution_locality
        if wanted and not locality.matches(wanted, self.settings.locality):
            HandOff(
                self.store, job.job_id, self.feed.name, wanted, self.settings.locality, self.settings, self.log
            ).serve(self.stop, report)
            return report, False
        backoff = Backoff(
            self.settings.retry_backoff, self.settings.max_backoff, lambda: self._job(job.job_id).high_water
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
        )
        coordinator.wanted = self._wanted(self.latest.project, self.latest.compiled)
        if self.earlier is not None:  # the job's own view: its coordinator never records another
            coordinator.wanted = replace(coordinator.wanted, view=job.definition.view)
        plan = self._plan(job)
        ahead, rejoin = StageAhead(plan.stager), False
        try:
            if self.settings.follow:
                self._follow(job, coordinator, plan, ahead, report)
            else:
                self._once(job, coordinator, plan, ahead, report, created)
        except table_change.Rejoin:
            rejoin = True
        finally:
            ahead.close()
        if self.refused:  # said on the job once this node's coordinator thread, which checkpoints, has stopped
            self._refuse(self.refused)
            report.status, report.note, report.error = "error", self.refused, self.refused
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
        runner.spark = self.spark
        return runner

    def take(self, project: Project, compiled: CompiledFeed | None) -> None:
        """The project changed under this --follow node. What the job takes of it in place (options, tables,
        descriptions, keys) its coordinator records once every node running the feed has the same copy
        (`rollout`); until then every node emits what the job records. A copy with which this node cannot run
        the job (a definition the job cannot take, a table it reads that project.yml does not declare, the feed
        gone) stops the job on this node, saying why; the node runs it again once its copy changes."""
        if self.earlier is not None or self.left_version:
            return
        if compiled is not None and compiled.feed.version != self.feed.version:
            self.leave_version()  # the node runs the new version's job beside it (`commands/run.py`)
            return
        if compiled is not None:
            self.latest = rollout.Copy(project, compiled, _now(self.store))
        if self.job_id is None or self.stop.is_set():
            return
        job = self._job(self.job_id)
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

    def _refuse(self, exc: RunError | str) -> None:
        """Seen in `feedctl jobs` too: the job's high-water mark stops here unless another node runs it."""
        with self.store.transaction() as conn:
            jobs.set_running_status(conn, self.job_id, f"refused by node {self.settings.node_id}: {exc}")

    def _once(self, job, coordinator: JobCoordinator, plan: FeedPlan, ahead: StageAhead, report, created: bool) -> None:
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
                    if not self._running(job, report) or coordinator.step():
                        return
                    if not self._emit(job, plan, ahead, report):
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
    def history_headroom(self) -> float | None:
        """The job's least history headroom, where this node coordinates it (a metric)."""
        coordinator = self.coordinator
        if coordinator is None or coordinator.epoch is None:
            return None
        return coordinator.history.least()

    def halt(self) -> None:
        """Stop this feed's work on the node, waking its threads from their sleep."""
        self.stop.set()
        if self.coordinator is not None:
            self.coordinator.wake.set()
            self.coordinator.cut.set()

    def _follow(self, job, coordinator: JobCoordinator, plan: FeedPlan, ahead: StageAhead, report) -> None:
        """A --follow node emits its spans of the job while the job runs; its coordinator thread coordinates
        whenever the job's lease is free to this node. Both sleep while the job is quiet, until the node's
        watch wakes them."""
        done, stop = threading.Event(), threading.Event()
        thread = threading.Thread(
            target=following.serve, args=(coordinator, stop, done), name=f"coordinator-{job.job_id}", daemon=True
        )
        coordinator.leases = self.shared.leases
        coordinator.ticker = self.shared.ticker
        if self.shared.watch is not None:
            coordinator.watched, coordinator.newest = True, self.shared.watch.newest
            self.shared.watch.add(job.job_id, self.sources, coordinator.wake, coordinator.cut, coordinator.table_moved)
        thread.start()
        try:
            while not self.stop.is_set() and not done.is_set():
                try:
                    emitted = self._emit(job, plan, ahead, report)
                    if emitted is None:  # the job no longer runs
                        return
                except Exception as exc:
                    failure = self._retrying.classify(exc)
                    if failure.kind != ErrorKind.STORE_UNAVAILABLE:
                        raise
                    self.log(
                        f"{self.feed.name}: {failure.cause}; trying again", event="store_retry", feed=self.feed.name
                    )
                    self.stop.wait(self.settings.poll_interval)
                    continue
                if not emitted:
                    coordinator.cut.wait(LOOK_AGAIN if coordinator.watched else self.settings.poll_interval)
                    coordinator.cut.clear()
                else:
                    coordinator.batch_emitted()
        finally:
            if self.shared.watch is not None:
                self.shared.watch.remove(job.job_id)
            stop.set()
            coordinator.wake.set()
            thread.join()
        if coordinator.error is not None:
            raise coordinator.error

    def _job(self, job_id: int) -> jobs.Job:
        with self.store.reading() as conn:  # looked at before every batch: no write lock for it
            return jobs.get_job(conn, job_id)

    def _pending(self, job_id: int) -> Pending:
        """The job, its spans and its batches pending, read in one snapshot: on a --follow node, one shared with
        its other feeds looking for their next batch."""
        if self.shared.reads is not None:
            pending = self.shared.reads.run(job_id, job_id)
        else:
            with self.store.reading() as conn:
                [pending] = emit_reads.read(conn, [job_id])
        if pending is None:
            raise JobError(f"no job {job_id}")
        return pending

    def _running(self, job: jobs.Job, report: RunReport, fresh: jobs.Job | None = None) -> bool:
        """Whether the job still runs (`fresh`: as just read, else read in a snapshot of its own); its end said
        if not."""
        fresh = fresh or self._job(job.job_id)
        if fresh.status != JobStatus.RUNNING and report.status == JobStatus.RUNNING:
            report.status = fresh.status
            report.note, report.error = stopped(fresh)
        return fresh.status == JobStatus.RUNNING

    def _plan(self, job: jobs.Job) -> FeedPlan:
        with self.store.reading() as conn:
            counts = {t: n for t, (_, n) in progress.positions(conn, job.job_id).items()}
        pushdown = dict(self.compiled.pushdown)
        stager = Stager(
            StagingArea.at(self.project.staging_location),
            job.job_id,
            self.sources,
            counts,
            pushdown,
            self.settings.node_id,
            self.shared.staging,
        )
        return FeedPlan(
            job_id=job.job_id,
            sources=self.sources,
            pushdown=pushdown,
            spans=counts,
            sql=self.compiled.sql,
            sink=self.sink,
            start=job.start,
            stager=stager,
        )

    def _emit(self, job: jobs.Job, plan: FeedPlan, ahead: StageAhead, report: RunReport) -> bool | None:
        """Emit this node's share of the next batch its spans have not emitted, and record it; False when
        there is none yet, None when the job no longer runs (read in the snapshot that looks for the batch)."""
        read = partial(
            next_batch,
            node=self.settings.node_id,
            sources=plan.sources,
            counts=plan.spans,
            declared=self.declared,
            has_query=self.compiled.sql is not None,
        )
        pending = self._pending(job.job_id)
        if not self._running(job, report, pending.job):
            return None
        if hands_over(pending.spans, self.settings.node_id):  # they go there first: none is emitted here
            with self.store.transaction() as conn:
                spans.boundary(conn, self.settings.node_id, job.job_id)
            pending = self._pending(job.job_id)
        batch = read(pending)
        if batch is None:
            return False
        intent, last = batch.first, batch.last
        batches = batches_text(intent.batch_seq, last.batch_seq)
        self.backfilling = emitted_batch.is_backfill(intent)
        watch = BatchProgress(
            self.log,
            self.feed.name,
            job.job_id,
            intent.batch_seq,
            last.batch_seq,
            emitted_batch.kind(intent, len(batch.intents) > 1),
            self.project,
            self.compiled.sql is not None,
        )
        if plan.sql is not None or intent.kind == IntentKind.SCAN:  # Spark's: its JVM starts while it is staged
            self.spark.get()
        try:
            with watch:
                results = self._retrying(
                    batches,
                    # Spark is asked for only when the batch goes to it: a few changes the node writes itself
                    lambda: execute(
                        partial(self.shared.spark_jobs.run, lambda: self.spark.get()()), plan, batch, ahead, watch
                    ),
                )
        except Exception as exc:
            failure = self._retrying.classify(exc)
            if not failure.ends_job:  # a store error, a lost lease, a stopped job: no job is failed for it
                raise
            if failure.kind != ErrorKind.TERMINAL and self.stop.is_set():  # interrupted: emitted again next run
                return False
            self._fail(job, report, failure.cause, outage=failure.kind == ErrorKind.OUTAGE)
            return False
        finally:
            self.backfilling = False
        self.settings.knobs.reached("after-emit")
        result = reduce(BatchResult.plus, results.values())
        keys = batch.spans
        emitted_batch.tell(
            self.log, self.feed.name, self.settings.node_id, batch.options, batch.parts(), result, len(keys)
        )

        record = Emitted(
            job.job_id,
            self.settings.node_id,
            keys,
            last.batch_seq,
            last.target,
            intent.batch_seq - 1,
            {batch_seq: result_of.to_json() for batch_seq, result_of in results.items()},
        )
        if self.shared.records is not None:  # a --follow node: with the records of its other feeds' batches
            done = self.shared.records.run(job.job_id, record)
        else:
            with self.store.transaction() as conn:
                [done] = emit_writes.record(conn, [record])
        for i in batch.intents:
            plan.stager.clean(i.batch_seq)
        if len(done) < len(keys):
            lost = sorted(set(keys) - set(done))
            self.log(
                f"{self.feed.name}: spans {', '.join(f'{t}/{s}' for t, s in lost)} moved to another node "
                f"during {batches}",
                event="spans_lost",
                feed=self.feed.name,
                batch=last.batch_seq,
            )
        report.batches += len(batch.intents)
        report.messages += result.messages
        report.files += result.files
        return True

    def _fail(self, job: jobs.Job, report: RunReport, error: str, outage: bool = False) -> None:
        """A batch of this node's spans cannot be emitted: the job pauses or fails, whoever coordinates it."""
        options = self._job(job.job_id).definition.options  # on_error as the job has it now
        Frontier(self.store, job, None, options, self.sink, [], self.end_time, report, self.log, self._retrying).fail(
            error, outage
        )


def _now(store: StateStore) -> int:
    """The store's sequence number for a copy of the project loaded now."""
    with store.transaction() as conn:
        return sequence.tick(conn)
