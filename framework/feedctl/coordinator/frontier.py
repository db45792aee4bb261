"""The job's frontier, as CockroachDB's changeFrontier: a batch that every span has emitted (each owner
records its own spans) moves the high-water mark to its target, committed in a checkpoint; a resolved
timestamp is written to the sink once due, after the checkpoint it reports; and the job finishes (end_time,
an initial scan only) or pauses or fails (`on_error`), or stops at a schema change under
`schema_change_policy: stop`. Every write is conditional on the lease's epoch.

`taken` decides, from the batches cut and the spans' progress, which batches the mark takes and whether the
job ends with them; `Frontier` carries it out: the checkpoint in one transaction, the resolved timestamp it
reports written after it, and only then the job's end, so that a job never ends before its last resolved
timestamp is out."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from feedctl.coordinator import fenced, resolved
from feedctl.coordinator.knobs import TestingKnobs
from feedctl.job.definition import definition_of
from feedctl.options import InitialScan, OnError, Options, SchemaChangeAction
from feedctl.sinks.sink import ResolvedFile, Sink
from feedctl.source.delta import DeltaSource
from feedctl.state import batch_intents, event_times, jobs, spans
from feedctl.state.batch_intents import IntentKind
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore
from feedctl.units import Hlc


class Ending(StrEnum):
    """How a job ends once the mark takes a batch."""

    SCANNED = "scanned"  # `initial_scan: only`: its scan is emitted, the job succeeded
    END_TIME = "end_time"  # the mark reached `end_time`: the job succeeded
    SCHEMA_STOP = "schema_stop"  # a schema change under `schema_change_policy: stop`: the job fails there


@dataclass(frozen=True)
class Taken:
    done: tuple[batch_intents.Intent, ...]  # in order, each emitted by every span
    ending: Ending | None


def taken(pending: list[batch_intents.Intent], lowest: int | None, scan_only: bool, end_time: Hlc | None) -> Taken:
    """The batches every span has emitted (`lowest`: the lowest batch a span emitted, None without spans),
    up to the first one the job ends with; nothing is cut after such a batch, and this says so in case."""
    done: list[batch_intents.Intent] = []
    for intent in pending:
        if lowest is None or intent.batch_seq > lowest:
            break
        done.append(intent)
        ending = _ending(intent, scan_only, end_time)
        if ending is not None:
            return Taken(tuple(done), ending)
    return Taken(tuple(done), None)


def _ending(intent: batch_intents.Intent, scan_only: bool, end_time: Hlc | None) -> Ending | None:
    if intent.kind == IntentKind.SCAN and scan_only:
        return Ending.SCANNED
    if SchemaChangeAction.STOP in intent.schema_changes.values():
        return Ending.SCHEMA_STOP
    return ended_at(intent.target, end_time)


def ended_at(high_water: Hlc, end_time: Hlc | None) -> Ending | None:
    return Ending.END_TIME if end_time is not None and high_water >= end_time else None


def said_checkpoint(log, feed: str, job_id: int, intent: batch_intents.Intent) -> None:
    """The mark took batch `intent` in, at its target."""
    log(
        f"{feed}: checkpoint of batch {intent.batch_seq}: high-water {intent.target.for_people()}",
        event="checkpoint",
        feed=feed,
        job_id=job_id,
        batch=intent.batch_seq,
        high_water=str(intent.target),
    )


class Frontier:
    def __init__(
        self,
        store: StateStore,
        job: jobs.Job,
        epoch: int | None,
        options: Options,
        sink: Sink,
        topics: list[str],
        end_time: Hlc | None,
        report,
        log,
        retrying: Callable,
        sources: dict[str, DeltaSource] | None = None,
        knobs: TestingKnobs | None = None,
    ):
        self.store, self.job_id, self.feed, self.epoch = store, job.job_id, job.feed, epoch
        self.options, self.sink, self.topics, self.report, self.log = options, sink, topics, report, log
        self.retrying = retrying  # retries what a retry may fix (the sink's resolved write)
        self.end_time = end_time
        self.sources = sources or {}  # to describe a schema change the job stops at
        self.knobs = knobs or TestingKnobs()
        self.marks: jobs.Marks | None = None  # the job's marks after its last checkpoint here

    def advance(self) -> bool:
        """Take every batch that all spans have emitted into the high-water mark, in order, in one
        transaction; True once the job has ended (finished, or stopped at a schema change)."""
        with self.store.reading() as conn:
            pending = batch_intents.pending_intents(conn, self.job_id)
            lowest = spans.lowest(conn, self.job_id)
        decided = taken(pending, lowest, self.options.initial_scan == InitialScan.ONLY, self.end_time)
        if not decided.done:
            return False
        self._take(decided.done[-1].target, decided.done)
        return self._end(decided.ending, decided.done[-1])

    def checkpoint(self, target: Hlc) -> bool:
        """Time alone moves the mark: every span has emitted everything up to `target`, no change is due. True
        once the job has ended (the mark reached `end_time`)."""
        self._take(target, ())
        return self._end(ended_at(target, self.end_time), None)

    def _end(self, ending: Ending | None, last: batch_intents.Intent | None) -> bool:
        if ending is None:
            return False
        if ending == Ending.SCHEMA_STOP:
            self.stop_at_schema_change(last)
        else:
            self.succeed()
        return True

    def _take(self, target: Hlc, intents: tuple[batch_intents.Intent, ...]) -> None:
        """Commit the high-water mark to `target`, taking `intents` in, in one transaction, then emit a
        resolved timestamp if one is due."""
        with self.store.transaction() as conn:
            fenced.checkpoint(conn, self.job_id, self.epoch, target, intents)
            fresh = jobs.marks(conn, self.job_id)
        self.knobs.reached("after-checkpoint")
        self.report.high_water = fresh.high_water
        for intent in intents:  # a batch's; time alone moves the mark every poll, said by `resolved` lines
            said_checkpoint(self.log, self.feed, self.job_id, intent)
        now = time.time()
        self.marks = self.resolve(fresh, now, now, self._in_transaction)

    def _in_transaction(self, write: Callable) -> None:
        with self.store.transaction() as conn:
            write(conn)

    def resolve(self, fresh: jobs.Marks, now: float, at: float, record: Callable) -> jobs.Marks:
        """Write a resolved timestamp of the mark if one is due at `now`, and record it (`record` runs a write
        in a transaction) as written `at`; the job's marks after it."""
        if not self.resolved_due(fresh, now):
            return fresh
        # Written outside any transaction, after the checkpoint it reports was committed: whoever holds the
        # lease by now, every change up to it is emitted.
        where = self.retrying("resolved", lambda: self.write_resolved(fresh))
        return self.resolved_written(fresh, at, where, record)

    def resolved_due(self, fresh: jobs.Marks, now: float) -> bool:
        return resolved.due(self.options, fresh.high_water, fresh.resolved, fresh.resolved_at, now)

    def write_resolved(self, fresh: jobs.Marks) -> str:
        """The resolved timestamp of the mark to the sink, once; where it went."""
        return self.sink.write_resolved(fresh.high_water, self.options.format, self.options.envelope, self.topics)

    def resolved_file(self, fresh: jobs.Marks) -> ResolvedFile | None:
        """The file in a local folder `write_resolved` would write, for a node to write with others' at once."""
        return self.sink.resolved_file(fresh.high_water, self.options.format, self.options.envelope)

    def resolved_written(self, fresh: jobs.Marks, at: float, where: str, record: Callable) -> jobs.Marks:
        """The resolved timestamp of the mark written to the sink (`where`): recorded as written `at`, said;
        the job's marks after it."""
        self.knobs.reached("after-resolved-file")
        record(lambda conn: fenced.record_resolved(conn, self.job_id, self.epoch, fresh.high_water))
        self.report.resolved = fresh.high_water
        self.log(
            f"{self.feed}: resolved {fresh.high_water.for_people()} written to {where}",
            event="resolved",
            feed=self.feed,
            resolved=str(fresh.high_water),
            where=where,
        )
        return fresh._replace(resolved=fresh.high_water, resolved_at=at)

    def stop_at_schema_change(self, intent: batch_intents.Intent) -> None:
        """`schema_change_policy: stop`: everything up to the change is emitted (and the change's own
        version's row changes, at its timestamp): the job fails saying where a new job takes over."""
        table = min(t for t, action in intent.schema_changes.items() if action == SchemaChangeAction.STOP)
        version = intent.ranges[table][1]
        with self.store.transaction() as conn:
            at = event_times.recorded_after(conn, self.job_id, table, version - 1, version)[0].event_ts
            definition = definition_of(jobs.get_job(conn, self.job_id))
        source = self.sources.get(table)
        what = (
            source.schema_change(version).describe()
            if source and source.schema_changes(version - 1, version)
            else f"{table} version {version}"
        )
        rekeyed = [c for c in definition.key_changes if (c.table, c.version) == (table, version)]
        if rekeyed:
            what += f"; key {rekeyed[0].before.describe()} → {rekeyed[0].after.describe()}"
        self.fail(
            f"schema change occurred at {at} ({what}); every change up to it is emitted. To go on, start "
            f"a new job from it: feedctl run --new-job -s {self.feed} --cursor '{at}'",
            stop=True,
        )

    def succeed(self) -> None:
        with self.store.transaction() as conn:
            if jobs.finish(conn, self.job_id, JobStatus.SUCCEEDED, epoch=self.epoch):
                self.report.status = JobStatus.SUCCEEDED

    def fail(self, error: str, outage: bool = False, stop: bool = False) -> None:
        """Pause or fail the job per `on_error`, or pause it whatever `on_error` says when the cause is an
        outage (`resume` continues once it is over), or fail it whatever `on_error` says at a schema change
        it is to `stop` at; its high-water mark stays where the last checkpoint put it."""
        paused = not stop and (outage or self.options.on_error == OnError.PAUSE)
        status = JobStatus.PAUSED if paused else JobStatus.FAILED
        with self.store.transaction() as conn:
            moved = jobs.finish(conn, self.job_id, status, error=error, epoch=self.epoch)
        report = self.report
        report.error = error
        report.status, report.note = (status, error) if moved else (report.status, f"stopped: {error}")
        self.log(
            f"{self.feed}: job {self.job_id} {status}: {error}",
            event="job_" + status,
            feed=self.feed,
            job_id=self.job_id,
            error=error,
        )
