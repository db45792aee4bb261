"""What the node's ticker (`node/ticker.py`) does of a steady job, on the job's coordinator (`SteadyJob`, a part
of `JobCoordinator`): a watched job whose last full step left no version to cut, and nothing waiting but plain
batches of changes, is steady. Until something else wakes it, and for `LOOK_AGAIN` at most, the ticker moves
its mark to the closed timestamp and writes its resolved timestamps (`tick_target`, `ticked`), cuts the new
versions the node's watch finds of its tables, up to `batches_ahead` waiting (`steady_cut`), and takes the
batches waiting into its mark as this node's spans emit them (`steady_take`): each for many jobs in one
transaction, with the ticker holding the job's `stepping`; the batches the spans of other nodes emitted too,
as the node's watch tells of them. Its resolved timestamps are written by the ticker's workers holding the
job's `resolving` rather than `stepping`, so that its cuts and takes go on meanwhile. What is more than that
(a schema or key change, an end, spans moving) is the full step's: the job leaves the ticker, and its own
turns on the node's scheduler step it."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from feedctl.coordinator import cut, resolved
from feedctl.coordinator.frontier import Frontier, said_checkpoint, taken
from feedctl.job.definition import definition_of
from feedctl.sinks.sink import ResolvedFile
from feedctl.state import batch_intents, event_times, jobs
from feedctl.state.batch_intents import IntentKind
from feedctl.units import Hlc, parse_duration

MAX_NAP = 10.0  # seconds a job watched by its node (`node/watch.py`) sleeps at most without a wake
# Seconds a steady watched job and its spans go at most without looking at the store and the tables
# themselves: what a wake the node's watch missed would cost in latency. A full step of a job reading a busy
# table costs tens of milliseconds: 500 jobs looking again every minute were a fifth of their node's work.
# Each job looks again after a random share of it, at least half: the jobs that became steady together (a
# node's start, a commit read by hundreds of feeds) would otherwise all step at once, a pause for all.
LOOK_AGAIN = 300.0
# Seconds a steady job's mark goes at most without moving on, whatever its checkpoints' frequency: the ticker
# writes many jobs' marks at once, and a job's high-water mark then follows the closed timestamp closely.
TICK_AT_MOST = 5.0


@dataclass
class Steady:
    """A watched job's last full step left no version to cut, and nothing waiting but plain batches of changes:
    until something wakes it, and for `LOOK_AGAIN` at most, the node's ticker ticks it (`node/ticker.py`),
    cuts its new versions and takes the batches waiting into its mark once every span emitted them."""

    wakes: int  # the wake's count when that step began
    look_again_at: float  # when its look again is due (monotonic, `look_again`)
    job: jobs.Job
    marks: jobs.Marks  # as the last step left them
    due_at: float  # when the next tick is due (wall clock, on the grid of its interval)
    positions: dict[str, tuple[int, int]]  # each table's (version, spans), as that step read them
    last: dict[str, event_times.Recorded | None]  # each table's newest version recorded: every one is cut
    waiting: tuple[batch_intents.Intent, ...] = ()  # batches cut, not yet taken into the mark, at most batches_ahead
    emitted: bool = False  # spans emitted one (this node's, or another's): the ticker looks whether every span has
    # `marks` is changed by the ticker (the mark it committed) and by a worker writing a resolved timestamp
    # (what it wrote) at once: each changes its own fields, under this lock.
    marks_lock: threading.Lock = field(default_factory=threading.Lock)

    def after(self, table: str) -> int:
        """The table's last version cut: the ticker cuts those after it (`SteadyJob.steady_cut`)."""
        last = self.last.get(table)
        return last.version if last is not None else self.positions[table][0]


def look_again() -> float:
    """When a job steady from now looks again (monotonic): within `LOOK_AGAIN`, past half of it."""
    return time.monotonic() + LOOK_AGAIN * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class SteadyCut:
    """New versions of a steady job's tables, recorded and cut into batches by the node's ticker, with other
    jobs' in one transaction (`event_times.record`, `batch_intents.cut`)."""

    fresh: list[event_times.Recorded]
    batches: tuple[batch_intents.NewBatch, ...]


@dataclass(frozen=True)
class SteadyTake:
    """Batches waiting of a steady job, every span emitted, taken into its mark by the ticker with other jobs'
    in one transaction (`checkpoints.take`)."""

    done: tuple[batch_intents.Intent, ...]


@dataclass(frozen=True)
class ResolvedDue:
    """A steady job's resolved timestamp due at a tick (`SteadyJob.resolved_due`)."""

    marks: jobs.Marks  # at the tick's mark
    at: float  # when the tick was due: recorded as written then
    frontier: Frontier
    file: ResolvedFile | None  # in a local folder, for the ticker to write with others' at once; else the sink's


class SteadyJob:
    """The ticker's part of a `JobCoordinator` (whose state it shares)."""

    def tick_target(self, now: float) -> tuple[Hlc, float] | None:
        """Where a tick due by `now` moves the mark (the closed timestamp), and when it was due, with the
        ticker holding `stepping`; the next tick is then scheduled. None when none is due, or when the job
        leaves the ticker to step on its own: woken since it became steady, its look again due, or its
        end near (the full step ends it)."""
        steady = self.steady
        if steady is None or steady.waiting or steady.due_at > now:  # the mark waits for the batches cut
            return None
        target = self._closed(int(now * 1e9))  # the round's: the ticks of one closed lag share it
        if self._woken(steady) or (self.end_time is not None and target >= self.end_time):
            self._leave_ticker()
            return None
        at = steady.due_at
        steady.due_at = resolved.next_tick(self._every(), max(at + self._every(), now))
        if target <= steady.marks.high_water:
            return None
        return target, at

    def due_a_step(self) -> bool:
        """Whether the coordinator's turn steps the job as it wakes: not when the ticker holds it and nothing
        woke it since, its look again and any end not due (it woke to look at handing the job over)."""
        steady = self.steady
        return steady is None or self.end_time is not None or self._woken(steady)

    def _woken(self, steady: Steady) -> bool:
        return steady.wakes != self.wake.count or time.monotonic() >= steady.look_again_at

    def _leave_ticker(self) -> None:
        """The job steps on its own again: its coordinator's next turn."""
        self.ticker.drop(self.job_id)
        self.wake.set()

    def table_moved(self) -> None:
        """The node's watch found a new version of a table the job reads: the ticker cuts a steady job's
        (`steady_cut`); the job's own step moves any other."""
        if self.steady is not None and self.ticker is not None:
            self.ticker.nudge()
        else:
            self.wake.set()

    def steady_cut(self, now: float) -> SteadyCut | None:
        """The batches of a steady job's new versions, as the node's watch found them, with the ticker holding
        `stepping`: decided as a step decides (`cut.decide`), from what the step that left the job steady read
        (nothing waits, every version recorded is cut), for the ticker to write with other jobs' cuts in one
        transaction; a commit then costs a transaction per round rather than a step per feed. None when no
        table moved. A cut that is more than new versions in batches (a schema or key change, an end, versions
        left for later, a region column) is the full step's: the job leaves the ticker, and steps."""
        steady = self.steady
        if steady is None or len(steady.waiting) >= self.settings.batches_ahead or self.newest is None:
            return None
        seen = {t: self.newest(self.sources[t], MAX_NAP) for t in self.tables if t in steady.positions}
        if not any(v is not None and v > steady.after(t) for t, v in seen.items()):
            return None
        job = steady.job
        if self._woken(steady) or not self._plain(job, steady.positions):
            self._leave_ticker()
            return None
        floor = max([steady.marks.high_water, job.start, *(i.target for i in steady.waiting)])
        fresh = self._new_versions(job, self.tables, steady.positions, floor, steady.last)
        after = {t: steady.after(t) for t in self.tables}
        changed = any(self._log(t).schema_changes(after[t], self.latest[t]) for t in self.tables)
        decided = cut.decide(
            cut.CutFacts(
                after,
                floor,
                len(steady.waiting),
                fresh,
                self._closed(int(now * 1e9)),
                self.settings.batches_ahead,
                self.options.batch_rows,
                self.options.batch_bytes,
            )
        )
        cut_to = dict(after)
        for batch in decided.batches:
            cut_to.update({t: b for t, (_, b) in batch.ranges.items()})
        if changed or not decided.batches or any(r.version > cut_to[r.table] for r in fresh):
            self._leave_ticker()
            return None
        return SteadyCut(fresh, tuple(batch_intents.NewBatch(b.target, b.ranges) for b in decided.batches))

    def _plain(self, job: jobs.Job, positions: dict[str, tuple[int, int]]) -> bool:
        """Whether the job's cuts are new versions in batches and nothing more: no end, no region column, no
        table added or dropped, no key change asked for."""
        return (
            self.end_time is None
            and not self.regional
            and set(self.tables) == set(positions)
            and all(
                wanted == self.keys.get(t) or definition_of(job).key_left(t, wanted)
                for t, wanted in self.declared.items()
                if t in self.tables
            )
        )

    def _ticker_takes(self, job: jobs.Job, waiting: tuple[batch_intents.Intent, ...]) -> bool:
        """Whether the ticker can take the batches waiting (`steady_take`) of a job its step just cut: plain
        batches of changes, of a plain job, every version recorded in one."""
        positions, last = self._cut_from
        if not self._plain(job, positions):
            return False
        cut_to = {t: version for t, (version, _) in positions.items()}
        for intent in waiting:
            if intent.kind != IntentKind.CHANGES or intent.schema_changes:
                return False
            cut_to.update({t: b for t, (_, b) in intent.ranges.items()})
        return all(r is None or r.version <= cut_to.get(t, -1) for t, r in last.items())

    def steady_cut_written(self, cut: SteadyCut, intents: list[batch_intents.Intent]) -> None:
        """The ticker wrote the job's `steady_cut`: its spans emit the batches after those waiting (those on
        this node then call `batch_emitted`)."""
        steady = self.steady
        steady.waiting = (*steady.waiting, *intents)
        steady.last = {**steady.last, **{r.table: r for r in cut.fresh}}  # in version order: the newest stays
        self.idle = False
        self.settings.knobs.reached("after-intent")
        self.cut.set()

    def batch_emitted(self) -> None:
        """This node's spans emitted a batch, or the node's watch found that another node's did: the ticker takes
        the batches waiting of a steady job into its mark once every span has (`steady_take`); the job's own
        turn steps any other job. Said during a step, it is said again once the step is over: the step may
        leave the job steady, the batch waiting, and a wake now would cost a step more."""
        with self._emits:
            if self._in_step:
                self._emitted_in_step = True
                return
            steady = self.steady
            if steady is not None and steady.waiting and self.ticker is not None:
                steady.emitted = True
                self.ticker.nudge()
                return
        self.wake.set()  # not steady: its step takes the batch

    def steady_emitted(self) -> bool:
        """Whether spans emitted a batch of the steady job since the ticker last looked, with the ticker holding
        `stepping`: it then reads the spans (`steady_take`). Said once: a batch emitted after this look and
        before that read is said again (`batch_emitted`), never lost."""
        steady = self.steady
        if steady is None or not steady.emitted:
            return False
        steady.emitted = False
        return True

    def steady_take(self, lowest: int | None) -> SteadyTake | None:
        """The batches waiting of a steady job that every span has emitted (`lowest`: the lowest batch a span
        emitted), with the ticker holding `stepping`; None while the first has not been."""
        steady = self.steady
        if steady is None or not steady.waiting:
            return None
        done = taken(list(steady.waiting), lowest, False, None).done
        return SteadyTake(done) if done else None

    def steady_taken(self, take: SteadyTake) -> Hlc:
        """The ticker wrote the job's `steady_take`: the mark it moved to, whose resolved timestamp the ticker
        then writes if one is due (`ticked`)."""
        steady = self.steady
        for intent in take.done:
            steady.positions.update({t: (b, steady.positions[t][1]) for t, (_, b) in intent.ranges.items()})
            said_checkpoint(self.log, self.feed, self.job_id, intent)
        target = take.done[-1].target
        steady.waiting = steady.waiting[len(take.done) :]
        self.idle = not steady.waiting
        self.marked(target)
        steady.due_at = self._first_tick(steady.marks)
        return target

    def marked(self, target: Hlc) -> None:
        """The ticker committed the job's mark at `target` (a tick's or a take's), with `stepping` held: the
        next cut's versions are stamped above it (`steady_cut`), whether or not a resolved timestamp of an
        earlier mark is still being written."""
        steady = self.steady
        if steady is None:  # the lease lost meanwhile: the full step reads the job again
            return
        with steady.marks_lock:
            steady.marks = steady.marks._replace(high_water=target)
        self.report.high_water = max(self.report.high_water, target)

    def ticked(self, target: Hlc, at: float, record) -> None:
        """After the ticker committed the mark at `target` (a tick due `at`): write the resolved timestamp if
        one is due, with `record` recording it (`GroupCommit.run` of the job's write), on a worker of the
        ticker holding `resolving`: the ticker meanwhile cuts and takes the job's batches (`stepping` is not
        held), and moves its mark, but ticks it again only once this is over. A sink's failure is not retried
        here: it raises, and the job steps on its own, whose retries pause it if the sink stays away."""
        due = self.resolved_due(target, at)
        if due is not None:
            self.resolved_written(due, due.frontier.write_resolved(due.marks), record)

    def resolved_due(self, target: Hlc, at: float) -> ResolvedDue | None:
        """The resolved timestamp of a tick's mark at `target` (due `at`), if one is due: for the ticker's
        worker to write (`ticked`, or with other jobs' files at once), then `resolved_written`."""
        steady = self.steady
        self.settings.knobs.reached("after-checkpoint")
        marks = steady.marks._replace(high_water=target)
        frontier = self._frontier(steady.job)
        # A tick on the grid is due at its instant, whatever the clock's rounding (`resolved.GRID_SLACK`).
        if not frontier.resolved_due(marks, at + resolved.GRID_SLACK):
            return None
        return ResolvedDue(marks, at, frontier, frontier.resolved_file(marks))

    def resolved_written(self, due: ResolvedDue, where: str, record) -> None:
        """The resolved timestamp `due` written (to `where`): recorded with `record`, said."""
        steady = self.steady
        said = self.report.resolved
        wrote = due.frontier.resolved_written(due.marks, due.at, where, record)
        with steady.marks_lock:  # the mark may have moved on meanwhile: only what this wrote changes
            steady.marks = steady.marks._replace(resolved=wrote.resolved, resolved_at=wrote.resolved_at)
        if self.report.resolved != said:
            self._resolved_at = time.time()

    def _first_tick(self, marks: jobs.Marks) -> float:
        """When a job that just became steady ticks first: once its resolved timestamp or checkpoint is due,
        or as soon as the closed timestamp passes its mark if that is sooner (a batch just taken), on the
        poll interval's grid."""
        every, now = self._every(), time.time()
        due = resolved.next_tick(every, (marks.resolved_at or now) + every)
        passes = marks.high_water.wall / 1e9 + self.settings.closed_lag
        return min(due, resolved.next_tick(self.settings.poll_interval, max(passes, now)))

    def _every(self) -> float:
        """Seconds between a steady job's ticks: its resolved interval, else its checkpoints', at most
        `TICK_AT_MOST` and at least a poll interval."""
        every = resolved.interval(self.options)
        every = every if every is not None else parse_duration(self.options.min_checkpoint_frequency)
        return max(min(every, TICK_AT_MOST), self.settings.poll_interval)
