"""The coordinator's loop for one feed's job: hold the job's lease, and loop: record new versions' event
timestamps, cut a batch and record it as an intent, execute it, hand its progress to the frontier.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass
from threading import Event

from feedctl.compiler.compile import CompiledFeed
from feedctl.coordinator import batch_plan, event_ts
from feedctl.coordinator.execute import FeedPlan, execute
from feedctl.coordinator.frontier import Frontier
from feedctl.coordinator.job import RunError, check_definition, create_job, stopped
from feedctl.coordinator.lease import Heartbeat, holder_id
from feedctl.coordinator.placement import locality_matches
from feedctl.coordinator.refusals import not_runnable
from feedctl.diagnostics import first_line
from feedctl.project.model import Project
from feedctl.sinks.registry import open_sink
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.source.stage import Stager
from feedctl.source.stage_ahead import NextBatch, StageAhead
from feedctl.source.staging_area import StagingArea
from feedctl.spark import session
from feedctl.spark.session import outage
from feedctl.state import jobs, nodes, progress
from feedctl.state.store import StateStore
from feedctl.testing.faults import maybe_kill
from feedctl.units import Hlc, parse_timestamp, size_text

MAX_BACKOFF = 30.0  # seconds between two attempts, at most


@dataclass
class RunSettings:
    follow: bool = False
    poll_interval: float = 1.0
    closed_lag: float = 3.0
    lease_ttl: float = 15.0
    liveness_ttl: float = nodes.LIVENESS_TTL  # a node silent this long is dead: its jobs are taken over
    node_id: str | None = None  # None: the host name, or `<host>-<pid>` while a live process uses that
    retries: int = 5  # for errors a retry may fix (storage, Spark); 1 + 2 + 4 + 8 + 16 s of backoff
    retry_backoff: float = 1.0
    new_job: bool = False  # start a new job for feeds whose newest job is canceled or failed
    locality: str = ""  # this runner's locality tiers, `region=us-east1,zone=a`


@dataclass
class RunReport:
    feed: str
    job_id: int | None
    status: str
    batches: int = 0
    messages: int = 0
    files: int = 0
    high_water: Hlc = Hlc(0)
    resolved: Hlc = Hlc(0)
    note: str = ""
    error: str = ""  # set when this run failed or paused the job


class JobRunner:
    def __init__(self, project: Project, compiled: CompiledFeed, store: StateStore, settings: RunSettings,
                 stop: Event | None = None, log=lambda message, **fields: None, spark_factory=None):
        self.project, self.compiled, self.store, self.settings = project, compiled, store, settings
        self.feed = compiled.feed
        self.options = compiled.options
        self.stop = stop or Event()
        self.log = log
        self.spark_factory = spark_factory
        self._spark_starting: Future | None = None
        self.sink_def = project.sinks[self.feed.sink]
        self.sink = open_sink(self.sink_def.uri, self.sink_def.options, str(project.root))
        self.sources = {t: DeltaSource(t, project.tables[t].location, project.tables[t].storage_options)
                        for t in compiled.tables}
        self.holder = holder_id(settings.node_id)
        end = self.options.get("end_time")
        self.end_time = parse_timestamp(end, allow_version=False).hlc if end else None
        self._reads: dict[str, tuple[float, int]] = {}  # per table: share of rows read, bytes of a read row

    def run(self) -> RunReport:
        problem = not_runnable(self.options, self.sink.KIND, self.sink.options)
        if problem:
            raise RunError(f"feed {self.feed.name}: {problem}")
        wanted = self.options.get("execution_locality")
        if wanted and not locality_matches(wanted, self.settings.locality):
            return RunReport(self.feed.name, None, "skipped",
                             note=f"execution_locality {wanted} does not match this runner's locality "
                                  f"({self.settings.locality or 'none'}; set it with --locality)")
        with self.store.transaction() as conn:
            job = jobs.newest_job(conn, self.feed.name)
        if job is None or (job.status in ("canceled", "failed") and self.settings.new_job):
            job = create_job(self.project, self.compiled, self.sources, self.store, self.log)
        report = RunReport(self.feed.name, job.job_id, job.status, high_water=job.high_water,
                           resolved=job.resolved)
        if job.status != "running":
            report.note, report.error = stopped(job)
            return report
        check_definition(job, self.compiled)
        while True:
            epoch = self._claim(job.job_id)
            if epoch is None:  # another live node coordinates: under --follow, stand by to take over
                if not self.settings.follow:
                    report.note = f"coordinated by {job.coordinator}, a live node"
                    return report
                if self.stop.wait(self.settings.poll_interval):
                    return report
                with self.store.transaction() as conn:
                    job = jobs.get_job(conn, job.job_id)
                if job.status != "running":
                    report.status = job.status
                    report.note, report.error = stopped(job)
                    return report
                continue
            try:
                with Heartbeat(self.store, job.job_id, self.holder, epoch, self.settings.lease_ttl) as beat:
                    self._loop(job, epoch, report, beat)
                return report
            except jobs.LeaseLost as exc:
                report.note = f"stopped: {exc}"
                if not self.settings.follow or self.stop.is_set():
                    return report
                self.log(f"{self.feed.name}: no longer coordinates job {job.job_id} ({exc}); standing by",
                         event="lease_lost", feed=self.feed.name, job_id=job.job_id)
            except jobs.NotRunning as exc:
                report.status, report.note = exc.status, str(exc)
                return report
            finally:
                with self.store.transaction() as conn:
                    jobs.release_lease(conn, job.job_id, epoch)

    def _claim(self, job_id: int) -> int | None:
        """The job's lease, when it is free or its holder is not a live node: a node that died or left
        gives up its jobs at once, not when their leases expire."""
        with self.store.transaction() as conn:
            live = nodes.live_holders(conn, self.settings.liveness_ttl)
            return jobs.claim_lease(conn, job_id, self.holder, self.settings.lease_ttl,
                                    lambda holder: holder not in live)

    # -- the loop --------------------------------------------------------------------------------------

    def _plan(self, job: jobs.Job, positions: dict[str, tuple[int, int]]) -> FeedPlan:
        keys = {t: self.project.tables[t].primary_key for t in self.sources}
        spans = {t: positions[t][1] for t in self.sources}
        pushdown = dict(self.compiled.pushdown)
        stager = Stager(StagingArea.at(self.project.staging_location), job.job_id, self.sources, keys, spans,
                        pushdown)
        return FeedPlan(job_id=job.job_id, sources=self.sources, keys=keys, pushdown=pushdown, spans=spans,
                        sql=self.compiled.sql, options=self.options, sink=self.sink, start=job.start, stager=stager)

    def _new_versions(self, job: jobs.Job, positions) -> list[progress.Recorded]:
        """Event timestamps for versions not yet recorded. Delta is read outside any state transaction;
        `progress.record` then refuses entries another runner recorded meanwhile."""
        with self.store.transaction() as conn:
            last = {t: progress.last_recorded(conn, job.job_id, t) for t in self.sources}
        floor = max(job.high_water, job.start)
        out = []
        for table, source in self.sources.items():
            after = last[table].version if last[table] else positions[table][0]
            latest = source.latest_version()
            if latest <= after:
                continue
            commits = source.commits(after, latest)
            stamps = event_ts.assign([c.commit_ns for c in commits], last[table].event_ts if last[table] else None,
                                     floor)
            if table not in self._reads:
                pushdown = self.compiled.pushdown[table]
                self._reads[table] = source.read_estimate(pushdown.columns, pushdown.scan_filter)
            share, row_bytes = self._reads[table]
            for c, ts in zip(commits, stamps):
                rows = max(1, round(c.rows * share))
                out.append(progress.Recorded(table, c.version, c.commit_ns, ts, rows, rows * row_bytes))
        return out

    def _next_step(self, job: jobs.Job, positions) -> progress.Intent | batch_plan.Plan | None:
        """A batch to execute, a time-only advance (a Plan without ranges), or None (nothing to do)."""
        with self.store.transaction() as conn:
            intent = progress.pending_intent(conn, job.job_id)
            if intent is not None:
                return intent
            if self.options["initial_scan"] in ("yes", "only") and not job.initial_scan_done:
                return progress.create_intent(conn, job.job_id, "scan", job.start,
                                              {t: (-1, positions[t][0]) for t in self.sources})
        fresh = self._new_versions(job, positions)
        closed = Hlc(time.time_ns() - int(self.settings.closed_lag * 1e9))
        with self.store.transaction() as conn:
            progress.record(conn, job.job_id, fresh)
            pending = [r for t in self.sources for r in progress.recorded_after(conn, job.job_id, t, positions[t][0])]
            plan = batch_plan.cut({t: p[0] for t, p in positions.items()}, pending, max(job.high_water, job.start),
                                  closed, int(self.options["batch_rows"]), self.end_time,
                                  self.options["batch_bytes"])
            if plan is None or not plan.ranges:
                return plan
            return progress.create_intent(conn, job.job_id, "changes", plan.target, plan.ranges)

    def _spark(self):
        """A handle on the session, which starts in the background on first need: the JVM starts while the
        first batch is staged. A start that failed is tried again by the next call."""
        starting = self._spark_starting
        if starting is None or (starting.done() and starting.exception() is not None):
            factory = self.spark_factory or (lambda: session.spark_session(self.project.spark_master,
                                                                            self.project.spark_conf))
            starting = self._spark_starting = session.in_background(factory)
        return starting.result

    def _retrying(self, what: str, action):
        """Run `action`, retrying what a retry may fix with exponential backoff. Errors that no retry fixes
        (SourceError), a lost lease and a requested stop go straight up."""
        attempt = 0
        while True:
            try:
                return action()
            except (SourceError, RunError, jobs.LeaseLost):
                raise
            except Exception as exc:
                cause = outage(exc, self.project.spark_master)
                if cause:  # the next attempt starts a new session
                    self._spark_starting = None
                    session.discard()
                attempt += 1
                if attempt > self.settings.retries or self.stop.is_set():
                    raise
                wait = min(self.settings.retry_backoff * 2 ** (attempt - 1), MAX_BACKOFF)
                self.log(f"{self.feed.name}: {what} failed ({cause or f'{type(exc).__name__}: {first_line(exc)}'}); "
                         f"retry {attempt} in {wait:.0f}s", event="retry", feed=self.feed.name, attempt=attempt)
                if self.stop.wait(wait):
                    raise

    def _next_batch(self, job: jobs.Job, intent: progress.Intent, positions) -> NextBatch | None:
        """The batch the cut will give once `intent` is checkpointed, from the versions recorded so far."""
        after = {t: intent.ranges[t][1] if intent.kind == "changes" and t in intent.ranges else positions[t][0]
                 for t in self.sources}
        with self.store.transaction() as conn:
            pending = [r for t in self.sources for r in progress.recorded_after(conn, job.job_id, t, after[t])]
        # The closed time moves only the target, never which versions are taken.
        plan = batch_plan.cut(after, pending, intent.target, intent.target, int(self.options["batch_rows"]),
                              self.end_time, self.options["batch_bytes"])
        return NextBatch.of(intent.batch_seq + 1, plan.ranges, pending) if plan is not None and plan.ranges else None

    def _execute(self, plan: FeedPlan, job: jobs.Job, intent: progress.Intent, positions, ahead: StageAhead):
        recorded = {}
        if intent.kind == "changes":
            with self.store.transaction() as conn:
                recorded = {t: progress.recorded_after(conn, job.job_id, t, a, b)
                            for t, (a, b) in intent.ranges.items()}
        next_batch = self._next_batch(job, intent, positions)
        return self._retrying(f"batch {intent.batch_seq}",
                              lambda: execute(self._spark(), plan, intent, recorded, ahead, next_batch))

    def _loop(self, job: jobs.Job, epoch: int, report: RunReport, beat: Heartbeat) -> None:
        with self.store.transaction() as conn:
            positions = progress.positions(conn, job.job_id)
        plan = self._plan(job, positions)
        topics = [self.sink.topic(t, bool(self.options["full_table_name"])) for t in self.sources]
        frontier = Frontier(self.store, job, epoch, self.options, self.sink, topics, self.end_time, report,
                            self.log, self._retrying)
        ahead = StageAhead(plan.stager)
        try:
            self._batches(job, frontier, report, beat, plan, positions, ahead)
        finally:
            ahead.close()

    def _batches(self, job, frontier: Frontier, report, beat, plan, positions, ahead: StageAhead) -> None:
        while not self.stop.is_set():
            if beat.lost.is_set():
                raise jobs.LeaseLost(f"job {job.job_id}: another runner took the lease")
            with self.store.transaction() as conn:
                job = jobs.get_job(conn, job.job_id)
            if job.status != "running":
                raise jobs.NotRunning(job.status)
            try:
                step = self._retrying("planning", lambda: self._next_step(job, positions))
                if step is None or isinstance(step, batch_plan.Plan):
                    if step is not None:  # no change to emit: only time moves on
                        frontier.checkpoint(step.target, {})
                        if frontier.finished():
                            return
                    if not self.settings.follow:
                        return
                    self.stop.wait(self.settings.poll_interval)
                    continue
                intent = step
                maybe_kill("after-intent")
                result = self._execute(plan, job, intent, positions, ahead)
            except SourceError as exc:
                return frontier.fail(str(exc))
            except (RunError, jobs.LeaseLost, jobs.NotRunning):
                raise
            except Exception as exc:
                if self.stop.is_set():  # interrupted: the intent stays pending for the next run
                    return
                cause = outage(exc, self.project.spark_master)
                return frontier.fail(cause or f"{type(exc).__name__}: {first_line(exc)}", outage=bool(cause))
            maybe_kill("after-emit")
            versions = {t: b for t, (_, b) in intent.ranges.items()} if intent.kind == "changes" else {}
            frontier.checkpoint(intent.target, versions, intent, result.to_json(), scan_done=intent.kind == "scan")
            for t, v in versions.items():
                positions[t] = (v, positions[t][1])
            plan.stager.clean(intent.batch_seq)
            report.batches += 1
            report.messages += result.messages
            report.files += result.files
            read = f"; read {result.files_read} of {result.files_total} data files ({size_text(result.bytes_read)}" \
                   f" of {size_text(result.bytes_total)})" if intent.kind == "scan" else ""
            self.log(f"{self.feed.name}: batch {intent.batch_seq} ({intent.kind}) emitted {result.messages} "
                     f"messages in {result.files} files{read}; high-water {intent.target}", event="batch",
                     feed=self.feed.name, batch=intent.batch_seq, **result.to_json())
            if intent.kind == "scan" and self.options["initial_scan"] == "only":
                return frontier.succeed()
            if frontier.finished():
                return

