"""This node's spans of one feed's job, batch after batch: the next batch they have not emitted, found with the
job in one snapshot (`share.pending`; on a --follow node, one shared with its other feeds looking), emitted
through Spark or by the node itself (`execute`) and recorded (`emitted_batch.recorded`): CockroachDB's change
aggregator. A batch that cannot be emitted pauses or fails the job, whoever coordinates it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial, reduce
from threading import Event

from feedctl.compiler.compile import CompiledFeed
from feedctl.coordinator.backoff import Retrying
from feedctl.coordinator.frontier import Frontier
from feedctl.coordinator.wait import Ask, Stepping, drive
from feedctl.errors import ErrorKind
from feedctl.job.definition import definition_of
from feedctl.job.revision import Key
from feedctl.job.start import stopped
from feedctl.node import emitted_batch, share
from feedctl.node.batch_progress import BatchProgress, batches_text
from feedctl.node.execute import BatchResult, FeedPlan, execute
from feedctl.node.settings import RunReport, RunSettings
from feedctl.node.share import Pending, hands_over, next_batch
from feedctl.node.shared import Shared
from feedctl.project.model import Project
from feedctl.sinks.sink import Sink
from feedctl.source.delta import DeltaSource
from feedctl.source.stage import Stager
from feedctl.source.stage_ahead import StageAhead
from feedctl.source.staging_area import StagingArea
from feedctl.spark import session
from feedctl.state import batch_intents, checkpoints, jobs, spans
from feedctl.state.jobs import JobError, JobStatus
from feedctl.state.store import StateStore
from feedctl.units import Hlc


@dataclass
class SpanEmitter:
    """One run of a job's spans on this node. `declared`: the tables' keys as this node's copy of the project
    declares them, which the runner changes as the copy changes."""

    store: StateStore
    settings: RunSettings
    job: jobs.Job
    report: RunReport
    feed: str
    project: Project
    plan: FeedPlan
    declared: dict[str, Key]
    end_time: Hlc | None
    spark: session.Starting
    shared: Shared
    retrying: Retrying
    stop: Event
    log: Callable
    backfilling: bool = False  # emitting a scan or a backfill now (a metric)

    def emit(self, ahead: StageAhead) -> bool | None:
        """`emitting`, on this thread."""
        return drive(self.emitting(ahead))

    def emitting(self, ahead: StageAhead) -> Stepping[bool | None]:
        """Emit this node's share of the next batch its spans have not emitted, and record it; False when
        there is none yet, None when the job no longer runs (read in the snapshot that looks for the batch).
        On a --follow node its read and its record are asked of the node (`Shared.reads`, `Shared.records`),
        which answers them with its other feeds' in one snapshot and one transaction."""
        job, report, feed, has_query = self.job, self.report, self.feed, self.plan.sql is not None
        pending = yield from self._pending()
        if not self.running(pending.job):
            return None
        if hands_over(pending.spans, self.settings.node_id):  # they go there first: none is emitted here
            with self.store.transaction() as conn:
                spans.boundary(conn, self.settings.node_id, job.job_id)
            pending = yield from self._pending()
        batch = next_batch(
            pending,
            node=self.settings.node_id,
            sources=self.plan.sources,
            counts=self.plan.spans,
            declared=self.declared,
            has_query=has_query,
        )
        if batch is None:
            return False
        intent, last = batch.first, batch.last
        batches = batches_text(intent.batch_seq, last.batch_seq)
        self.backfilling = emitted_batch.is_backfill(intent)
        watch = BatchProgress(
            self.log,
            feed,
            job.job_id,
            intent.batch_seq,
            last.batch_seq,
            emitted_batch.kind(intent, len(batch.intents) > 1),
            self.project,
            has_query,
        )
        if has_query or intent.kind == batch_intents.IntentKind.SCAN:  # its JVM starts while staged
            self.spark.get()
        try:
            with watch:
                results = self.retrying(
                    batches,
                    # Spark is asked for only when the batch goes to it: a few changes the node writes itself
                    lambda: execute(
                        partial(self.shared.spark_jobs.run, lambda: self.spark.get()()), self.plan, batch, ahead, watch
                    ),
                )
        except Exception as exc:
            failure = self.retrying.classify(exc)
            if not failure.ends_job:  # a store error, a lost lease, a stopped job: no job is failed for it
                raise
            if failure.kind != ErrorKind.TERMINAL and self.stop.is_set():  # interrupted: emitted again next run
                return False
            self._fail(failure.cause, outage=failure.kind == ErrorKind.OUTAGE)
            return False
        finally:
            self.backfilling = False
        self.settings.knobs.reached("after-emit")
        result = reduce(BatchResult.plus, results.values())
        keys = batch.spans
        emitted_batch.tell(self.log, feed, self.settings.node_id, batch.options, batch.parts(), result, len(keys))
        record = emitted_batch.Record(
            spans.Emitted(job.job_id, self.settings.node_id, keys, last.batch_seq, last.target, intent.batch_seq - 1),
            {batch_seq: result_of.to_json() for batch_seq, result_of in results.items()},
        )
        if self.shared.records is not None:  # a --follow node: with the records of its other feeds' batches
            done = yield Ask(self.shared.records, job.job_id, record)
        else:
            with self.store.transaction() as conn:
                [done] = emitted_batch.recorded(conn, [record])
        for i in batch.intents:
            self.plan.stager.clean(i.batch_seq)
        if len(done) < len(keys):
            lost = sorted(set(keys) - set(done))
            self.log(
                f"{feed}: spans {', '.join(f'{t}/{s}' for t, s in lost)} moved to another node during {batches}",
                event="spans_lost",
                feed=feed,
                batch=last.batch_seq,
            )
        report.batches += len(batch.intents)
        report.messages += result.messages
        report.files += result.files
        return True

    def running(self, fresh: jobs.Job | None = None) -> bool:
        """Whether the job still runs (`fresh`: as just read, else read in a snapshot of its own); its end said
        in the report if not."""
        fresh = fresh or job_now(self.store, self.job.job_id)
        if fresh.status != JobStatus.RUNNING and self.report.status == JobStatus.RUNNING:
            self.report.status = fresh.status
            self.report.note, self.report.error = stopped(fresh)
        return fresh.status == JobStatus.RUNNING

    def _pending(self) -> Stepping[Pending]:
        """The job, its spans and its batches pending, read in one snapshot: on a --follow node, one shared with
        its other feeds looking for their next batch."""
        job_id = self.job.job_id
        if self.shared.reads is not None:
            found = yield Ask(self.shared.reads, job_id, job_id)
        else:
            with self.store.reading() as conn:
                [found] = share.pending(conn, [job_id])
        if found is None:
            raise JobError(f"no job {job_id}")
        return found

    def _fail(self, error: str, outage: bool = False) -> None:
        """A batch of this node's spans cannot be emitted: the job pauses or fails, whoever coordinates it."""
        options = definition_of(job_now(self.store, self.job.job_id)).options  # on_error as the job has it now
        Frontier(
            self.store, self.job, None, options, self.plan.sink, [], self.end_time, self.report, self.log, self.retrying
        ).fail(error, outage)


def feed_plan(
    store: StateStore,
    job: jobs.Job,
    project: Project,
    compiled: CompiledFeed,
    sources: dict[str, DeltaSource],
    sink: Sink,
    node_id: str,
    shared: Shared,
) -> FeedPlan:
    """What this node knows of the job for all its batches: its tables, what it reads of them, its spans and
    where it stages their changes."""
    with store.reading() as conn:
        counts = {t: n for t, (_, n) in checkpoints.positions(conn, job.job_id).items()}
    pushdown = dict(compiled.pushdown)
    stager = Stager(
        StagingArea.at(project.staging_location), job.job_id, sources, counts, pushdown, node_id, shared.staging
    )
    return FeedPlan(
        job_id=job.job_id,
        sources=sources,
        pushdown=pushdown,
        spans=counts,
        sql=compiled.sql,
        sink=sink,
        start=job.start,
        stager=stager,
    )


def job_now(store: StateStore, job_id: int) -> jobs.Job:
    """The job as the store has it now, read in a snapshot (no write lock for a look)."""
    with store.reading() as conn:
        return jobs.get_job(conn, job_id)
