"""The coordinator of one feed's job: find or create the job, hold its lease, and loop: record new
versions' event timestamps, cut a batch and record it as an intent, execute it, checkpoint, emit resolved.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from threading import Event

from feedctl.compiler.compile import CompiledFeed
from feedctl.diagnostics import first_line
from feedctl.coordinator import batch_plan, event_ts, resolved
from feedctl.coordinator.execute import FeedPlan, clean_stage, execute
from feedctl.coordinator.faults import maybe_kill
from feedctl.coordinator.lease import Heartbeat, holder_id, takeable_from
from feedctl.coordinator.placement import default_spans, locality_matches
from feedctl.coordinator.refusals import not_runnable
from feedctl.coordinator.stage_ahead import NextBatch, StageAhead
from feedctl.project.model import Project
from feedctl.project.options import resolve_sink
from feedctl.sinks import naming
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.state import jobs, progress
from feedctl.state.store import StateStore
from feedctl.units import Hlc, parse_timestamp


class RunError(Exception):
    """A feed cannot run as asked; the message says why and what to do."""


@dataclass
class RunSettings:
    follow: bool = False
    poll_interval: float = 1.0
    closed_lag: float = 3.0
    lease_ttl: float = 15.0
    node_id: str = field(default_factory=lambda: os.uname().nodename)
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


def _now() -> Hlc:
    return Hlc(time.time_ns())


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
        self.sink = project.sinks[self.feed.sink]
        self.sink_options = resolve_sink(self.sink.options)
        self.sources = {t: DeltaSource(t, project.tables[t].location, project.tables[t].storage_options)
                        for t in compiled.tables}
        self.holder = holder_id(settings.node_id)
        self._row_bytes: dict[str, int] = {}

    # -- job lifecycle ---------------------------------------------------------------------------------

    def _start_point(self) -> tuple[Hlc, dict[str, int]]:
        """Where a new job starts: each table's latest version and the time after reading them (a commit
        landing meanwhile gets a later event timestamp, so it is emitted), or after the cursor."""
        cursor = self.options.get("cursor")
        point = parse_timestamp(cursor) if cursor else None
        if point is not None and point.version is not None and len(self.sources) > 1:
            raise RunError(f"feed {self.feed.name}: cursor version:{point.version} names a version of one "
                           "table; with several tables use a timestamp cursor")
        positions = {}
        for table, source in self.sources.items():
            latest = source.latest_version()
            if point is None:
                positions[table] = latest
            elif point.version is not None:
                if point.version > latest:
                    raise RunError(f"cursor version:{point.version} is after the latest version {latest} of {table}")
                positions[table] = point.version
            else:
                commits = source.commits(-1, latest)
                positions[table] = max([c.version for c in commits if c.commit_ns <= point.hlc.wall], default=-1)
                with self.store.transaction() as conn:
                    stamped_after = progress.first_recorded_above(conn, self.feed.name, table, point.hlc)
                if stamped_after is not None:  # an earlier job gave it an event timestamp after the cursor
                    positions[table] = min(positions[table], stamped_after - 1)
        if point is None:
            return _now(), positions
        if point.hlc is not None:
            return point.hlc, positions
        [(table, version)] = positions.items()
        commit = self.sources[table].commits(version - 1, version)[0] if version >= 0 else None
        return Hlc(commit.commit_ns if commit else 0), positions

    def _create_job(self) -> jobs.Job:
        start, positions = self._start_point()
        for table, source in self.sources.items():
            source.check_readable(max(positions[table], 0))
        spans = {t: self.project.tables[t].spans or default_spans(self.project) for t in self.sources}
        definition = {"tables": self.compiled.tables, "sql": self.compiled.sql, "options": self.options,
                      "sink": self.sink.name}
        with self.store.transaction() as conn:
            job = jobs.create_job(conn, self.feed.name, self.compiled.definition_hash, definition,
                                  self.sink.uri_display, start, {t: (positions[t], spans[t]) for t in self.sources})
        self.log(f"created job {job.job_id} for feed {self.feed.name} at {start}", event="job_created",
                 job_id=job.job_id, feed=self.feed.name)
        return job

    def run(self) -> RunReport:
        problem = not_runnable(self.options, self.sink.kind, self.sink.options)
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
            try:
                job = self._create_job()
            except SourceError as exc:
                raise RunError(f"feed {self.feed.name}: {exc}") from None
        report = RunReport(self.feed.name, job.job_id, job.status, high_water=job.high_water,
                           resolved=job.resolved)
        if job.status != "running":
            again = f"`feedctl run --new-job -s {self.feed.name}` starts a new job"
            report.note = {"paused": f"paused; `feedctl resume {self.feed.name}` to continue",
                           "failed": f"failed: {job.error}; {again}", "canceled": f"canceled; {again}",
                           "succeeded": "finished"}.get(job.status, job.status)
            report.error = job.error if job.status in ("paused", "failed") else ""  # exit 1 while it stands
            return report
        if job.definition_hash != self.compiled.definition_hash:
            raise RunError(
                f"feed {self.feed.name} changed since its job {job.job_id} was created (definition "
                f"{job.definition_hash[:19]} → {self.compiled.definition_hash[:19]}). To run the new definition, "
                f"cancel the job (`feedctl cancel {self.feed.name}`), then `feedctl run --new-job -s "
                f"{self.feed.name}`: a new job starts, with an initial scan unless the feed sets cursor "
                f"(cursor: '{job.high_water}' continues where it stopped). Or restore the previous definition.")
        with self.store.transaction() as conn:
            epoch = jobs.claim_lease(conn, job.job_id, self.holder, self.settings.lease_ttl,
                                     takeable_from(self.settings.node_id))
        if epoch is None:
            report.note = f"coordinated by {job.coordinator} until its lease expires"
            return report
        try:
            with Heartbeat(self.store, job.job_id, self.holder, epoch, self.settings.lease_ttl) as beat:
                self._loop(job, epoch, report, beat)
        except jobs.LeaseLost as exc:
            report.note = f"stopped: {exc}"
        except jobs.NotRunning as exc:
            report.status, report.note = exc.status, str(exc)
        finally:
            with self.store.transaction() as conn:
                jobs.release_lease(conn, job.job_id, epoch)
        return report

    # -- the loop --------------------------------------------------------------------------------------

    def _plan(self, job: jobs.Job, positions: dict[str, tuple[int, int]]) -> FeedPlan:
        return FeedPlan(
            job_id=job.job_id, sources=self.sources,
            keys={t: self.project.tables[t].primary_key for t in self.sources},
            columns=dict(self.compiled.columns), spans={t: positions[t][1] for t in self.sources},
            sql=self.compiled.sql, options=self.options, sink_uri=self.sink.uri, sink_kind=self.sink.kind,
            sink_options=self.sink_options,
            project_root=str(self.project.root), start=job.start,
            stage_root=Path(self.project.root) / "target" / "stage")

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
            if table not in self._row_bytes:
                self._row_bytes[table] = source.row_bytes()
            out.extend(progress.Recorded(table, c.version, c.commit_ns, ts, c.rows, c.rows * self._row_bytes[table])
                       for c, ts in zip(commits, stamps))
        return out

    def _end_time(self) -> Hlc | None:
        end = self.options.get("end_time")
        return parse_timestamp(end, allow_version=False).hlc if end else None

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
                                  closed, int(self.options["batch_rows"]), self._end_time(),
                                  self.options["batch_bytes"])
            if plan is None or not plan.ranges:
                return plan
            return progress.create_intent(conn, job.job_id, "changes", plan.target, plan.ranges)

    def _spark(self):
        """A handle on the session, which starts in the background on first need: the JVM starts while the
        first batch is staged. A start that failed is tried again by the next call."""
        from feedctl.aggregator import session

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
                attempt += 1
                if attempt > self.settings.retries or self.stop.is_set():
                    raise
                wait = self.settings.retry_backoff * 2 ** (attempt - 1)
                self.log(f"{self.feed.name}: {what} failed ({type(exc).__name__}: {first_line(exc)}); "
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
                              self._end_time(), self.options["batch_bytes"])
        return NextBatch.of(intent.batch_seq + 1, plan, pending) if plan is not None and plan.ranges else None

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
        ahead = StageAhead(plan)
        try:
            self._batches(job, epoch, report, beat, plan, positions, ahead)
        finally:
            ahead.close()

    def _batches(self, job, epoch, report, beat, plan, positions, ahead: StageAhead) -> None:
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
                        self._checkpoint(job, epoch, step.target, {}, None, None, report)
                        if self._finished(job, report, epoch):
                            return
                    if not self.settings.follow:
                        return
                    self.stop.wait(self.settings.poll_interval)
                    continue
                intent = step
                maybe_kill("after-intent")
                result = self._execute(plan, job, intent, positions, ahead)
            except SourceError as exc:
                return self._fail(job, epoch, report, str(exc))
            except (RunError, jobs.LeaseLost, jobs.NotRunning):
                raise
            except Exception as exc:
                if self.stop.is_set():  # interrupted: the intent stays pending for the next run
                    return
                return self._fail(job, epoch, report, f"{type(exc).__name__}: {first_line(exc)}")
            maybe_kill("after-emit")
            versions = {t: b for t, (_, b) in intent.ranges.items()} if intent.kind == "changes" else {}
            self._checkpoint(job, epoch, intent.target, versions, intent, result.to_json(), report,
                             scan_done=intent.kind == "scan")
            for t, v in versions.items():
                positions[t] = (v, positions[t][1])
            clean_stage(plan, intent)
            report.batches += 1
            report.messages += result.messages
            report.files += result.files
            self.log(f"{self.feed.name}: batch {intent.batch_seq} ({intent.kind}) emitted {result.messages} "
                     f"messages in {result.files} files; high-water {intent.target}", event="batch",
                     feed=self.feed.name, batch=intent.batch_seq, messages=result.messages, files=result.files)
            if intent.kind == "scan" and self.options["initial_scan"] == "only":
                return self._succeed(job, epoch, report)
            if self._finished(job, report, epoch):
                return

    def _checkpoint(self, job, epoch, target: Hlc, versions, intent, result, report, scan_done=False) -> None:
        with self.store.transaction() as conn:
            spans = {t: p[1] for t, p in progress.positions(conn, job.job_id).items()}
            progress.checkpoint(conn, job.job_id, epoch, target, versions, spans, intent, result, scan_done)
            jobs.set_running_status(conn, job.job_id, f"running: high-water={target}")
            fresh = jobs.get_job(conn, job.job_id)
        maybe_kill("after-checkpoint")
        report.high_water = fresh.high_water
        if resolved.due(self.options, fresh.high_water, fresh.resolved, fresh.resolved_at, time.time()):
            topics = [naming.topic_name(t, bool(self.options["full_table_name"]), self.sink.uri, self.sink_options)
                      for t in self.sources]
            name = self._retrying("resolved", lambda: resolved.write(
                self.sink.kind, self.sink.uri, str(self.project.root), self.sink_options, self.options,
                fresh.high_water, topics))
            maybe_kill("after-resolved-file")
            with self.store.transaction() as conn:
                progress.record_resolved(conn, job.job_id, fresh.high_water)
            report.resolved = fresh.high_water
            self.log(f"{self.feed.name}: resolved {fresh.high_water} ({name})", event="resolved",
                     feed=self.feed.name, resolved=str(fresh.high_water))

    def _finished(self, job: jobs.Job, report: RunReport, epoch: int) -> bool:
        end = self._end_time()
        if end is not None and report.high_water >= end:
            self._succeed(job, epoch, report)
            return True
        return False

    def _succeed(self, job, epoch, report) -> None:
        with self.store.transaction() as conn:
            if jobs.finish(conn, job.job_id, "succeeded", epoch=epoch):
                report.status = "succeeded"

    def _fail(self, job, epoch, report, error: str) -> None:
        status = "paused" if self.options["on_error"] == "pause" else "failed"
        with self.store.transaction() as conn:
            moved = jobs.finish(conn, job.job_id, status, error=error, epoch=epoch)
        report.error = error
        report.status, report.note = (status, error) if moved else (report.status, f"stopped: {error}")
        self.log(f"{self.feed.name}: job {job.job_id} {status}: {error}", event="job_" + status, error=error)

