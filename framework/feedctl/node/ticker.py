"""The ticks of a --follow node's steady jobs, from one thread. A job is steady when its last full step left no version
to cut and nothing waiting but plain batches of changes (`JobCoordinator`): until something wakes it, its steps would
only take those batches, move its mark to the closed timestamp and write a resolved timestamp when one is due. With a
thread of its own waking every resolved interval, a node of 100 such feeds spent most of its idle CPU in the kernel,
switching between their threads; here one thread wakes per interval for all of them (their ticks are due on one grid,
`resolved.next_tick`) and their marks commit in one transaction. Their resolved timestamps are written by the
ticker's workers: a round's files into local folders by one worker, which has the node's file writer process
write them all at once (`sinks/local_files.py`: written by threads of the node, each file's nine system calls
waited their turn behind the node's busy threads) and records them in one transaction; a sink over the network
one job a worker, recorded in a transaction shared with the others finishing then (`GroupCommit`). The
ticker's next round, which cuts what the node's watch found meanwhile, then waits for none of them.

When the node's watch finds a new version of a table a steady job reads, the ticker cuts its batches too, for
all such jobs in one transaction (`SteadyJob.steady_cut`), and as their spans emit them (this node's, or
another's as the node's watch finds), takes them into the jobs' marks in one more (`SteadyJob.steady_take`):
a commit read by a hundred feeds then costs a few transactions, not two hundred steps. A commit found while a
job's batch is being emitted is cut at once, up to `batches_ahead` batches waiting: the job's spans emit it
next, without waiting for the take.

A job leaves the ticker, and its coordinator steps it, when anything else wakes it (the node's
watch, a batch, the project), when its look again or its end is due, when its cut is more than new versions
in batches (a schema or a key change), and when a write of its fails: its lease lost or
the job stopped (the full step finds out), or its sink failing (the full step retries the resolved timestamp,
and pauses the job if the sink stays away). A slow sink holds one worker, never the ticker.

A round holds each job's `stepping` while it runs; a job's resolved timestamp being written holds its `resolving`
instead, until written and recorded. The next rounds then cut and take the job's batches and move its mark, and
tick it again only once the file is written: under load a round's files took most of each second, and a job
held for them all that time waited as long for its cut and its take. Such a job is not counted due meanwhile
(`_next_due`): its writer wakes the ticker once its file is written (`_let_go`)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from feedctl.sinks import local_files
from feedctl.sinks.local_files import FileWriter
from feedctl.state import batch_intents, checkpoints, event_times, jobs, spans
from feedctl.state.group_commit import GroupCommit
from feedctl.state.store import StateStore

WORKERS = 8  # resolved timestamps sent at once: as many sinks away as the node's others can wait beside
MIN_NAP = 0.01  # seconds between rounds at least: a job due whose coordinator steps it is not ticked meanwhile
IDLE_NAP = 1.0  # seconds the ticker sleeps at most with no job due: a job held meanwhile wakes it


class Ticker:
    def __init__(self, store: StateStore):
        self.store = store
        self.commits = GroupCommit(store)
        self._held: dict[int, object] = {}  # job id → its JobCoordinator
        self._lock = threading.Lock()
        self._held_more = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._writer: FileWriter | None = None
        self._put_once_each = local_files.put_once_each  # in this process until the ticker starts its writer

    def hold(self, coordinator) -> None:
        """Tick `coordinator`'s job from now on (it is steady: `coordinator.steady`)."""
        with self._lock:
            self._held[coordinator.job_id] = coordinator
        self._held_more.set()

    def nudge(self) -> None:
        """Look at the held jobs now: a table one reads has a new version (`SteadyJob.steady_cut`)."""
        self._held_more.set()

    def drop(self, job_id: int) -> None:
        with self._lock:
            self._held.pop(job_id, None)

    def __enter__(self) -> Ticker:
        self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="resolved")
        self._writer = FileWriter()
        self._put_once_each = self._writer.put_once_each
        self._thread = threading.Thread(target=self._serve, name="ticker", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._held_more.set()
        self._thread.join()
        self._workers.shutdown(wait=True)
        self._writer.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            self._held_more.wait(max(self._next_due() - time.time(), MIN_NAP))
            self._held_more.clear()
            if self._stop.is_set():
                return
            try:
                self.tick(time.time())
            except Exception:  # every held job steps on its own again, meeting the error and says it
                with self._lock:
                    held = list(self._held.values())
                for coordinator in held:
                    self._hand_back(coordinator)

    def _next_due(self) -> float:
        with self._lock:
            held = list(self._held.values())
        # A job whose resolved timestamp is being written is ticked once it is (`_let_go` wakes the ticker):
        # counted due meanwhile, it had the ticker go round every `MIN_NAP` over all its jobs for nothing.
        due = [
            c.steady.due_at for c in held if c.steady is not None and not c.steady.waiting and not c.resolving.locked()
        ]
        return min(due, default=time.time() + IDLE_NAP)

    def tick(self, now: float) -> None:
        """Cut, take and tick every held job whose coordinator is not stepping it: the marks due by `now` in one
        transaction (the jobs of one closed lag share a target, and a statement), their resolved timestamps
        handed to the workers at once (a mark's resolved timestamp waits for no cut: under commits the cuts
        took seconds of every ten), then the cuts in one transaction, the takes in one, and the resolved
        timestamps of the jobs taken handed over in turn. Each job's `stepping` is held for the round; its
        `resolving`, from its tick until its resolved timestamp is written and recorded: a job whose last one
        is still being written is cut and taken, not ticked."""
        with self._lock:
            held = list(self._held.values())
        locked, resolving, cuts, takes, ticks = [], set(), [], [], []
        try:
            for coordinator in held:
                if not coordinator.stepping.acquire(blocking=False):
                    continue  # stepping on its own: that step moves the mark
                locked.append(coordinator)
                try:
                    cut = coordinator.steady_cut(now)
                except Exception:  # its own step meets the error and says it
                    self._hand_back(coordinator)
                    continue
                if cut is not None:
                    cuts.append((coordinator, cut))
                emitted = coordinator.steady_emitted()
                if emitted:
                    takes.append(coordinator)
                if cut is not None or emitted or not coordinator.resolving.acquire(blocking=False):
                    continue
                resolving.add(coordinator)
                due = coordinator.tick_target(now)
                if due is not None:
                    ticks.append((coordinator, *due))
            committed = self._fenced(ticks, _mark)
            ticks = [t for t in ticks if t[0] in committed]
            for coordinator, target, _ in ticks:
                coordinator.marked(target)
            resolving -= {tick[0] for tick in ticks}  # let go by whoever writes their resolved timestamps
            self._write(ticks)
            self._cut(cuts)
            taken = self._take(takes, now)
            if taken:  # a commit found while their batches waited is cut in the next round
                self._held_more.set()
            ticks = [t for t in taken if t[0].resolving.acquire(blocking=False)]  # else ticked once written
            self._write(ticks)
        finally:
            for coordinator in resolving:
                coordinator.resolving.release()
            for coordinator in locked:
                coordinator.stepping.release()

    def _write(self, ticks: list) -> None:
        """The resolved timestamps due of `ticks`, whose `resolving` is held, written by the workers (here when
        the ticker has none: a test), which let it go: the files into local folders in one round, a sink over
        the network one job a worker."""
        if not ticks:
            return
        if self._workers is None:
            self._write_round(ticks)
            return
        local = [t for t in ticks if t[0].sink.resolved_is_local()]
        if local:
            self._workers.submit(self._write_round, local)
        for tick in ticks:
            if not tick[0].sink.resolved_is_local():
                self._workers.submit(self._resolve, *tick)

    def _cut(self, cuts: list) -> None:
        """The steady jobs' new batches (`SteadyJob.steady_cut`), in one transaction; a job written
        nothing (its lease lost, the job stopped), and every job when the store fails, is handed back."""
        if not cuts:
            return
        intents = {}
        try:
            with self.store.transaction(node=True) as conn:
                written = jobs.fence(conn, [(c.job_id, c.epoch) for c, _ in cuts])
                mine = [(c, cut) for c, cut in cuts if c.job_id in written]
                event_times.record(conn, {c.job_id: cut.fresh for c, cut in mine})
                made = batch_intents.cut(conn, {c.job_id: cut.batches for c, cut in mine})
            intents = {c: made.get(c.job_id, []) for c, _ in mine}
        except Exception:
            intents = {}
        for coordinator, cut in cuts:
            if coordinator in intents:
                coordinator.steady_cut_written(cut, intents[coordinator])
            else:
                self._hand_back(coordinator)

    def _take(self, coordinators: list, now: float) -> list:
        """The batches the ticker cut of jobs whose spans on this node emitted them, taken into their marks
        once every span has (`SteadyJob.steady_take`): the spans read for all in one snapshot, the marks
        written in one transaction. The ticks of the jobs it took, whose resolved timestamps are then due."""
        if not coordinators:
            return []
        try:
            with self.store.reading(node=True) as conn:
                lowest = spans.lowest_of(conn, [c.job_id for c in coordinators])
            takes = [(c, take) for c in coordinators if (take := c.steady_take(lowest.get(c.job_id))) is not None]
            if not takes:
                return []
            with self.store.transaction(node=True) as conn:
                written = jobs.fence(conn, [(c.job_id, c.epoch) for c, _ in takes])
                checkpoints.take(conn, {c.job_id: take.done for c, take in takes if c.job_id in written})
        except Exception:
            for coordinator in coordinators:
                self._hand_back(coordinator)
            return []
        ticks = []
        for coordinator, take in takes:
            if coordinator.job_id in written:
                ticks.append((coordinator, coordinator.steady_taken(take), now))
            else:
                self._hand_back(coordinator)
        return ticks

    def _fenced(self, ticks: list, values) -> set:
        """`values(target)` into the row of each tick's job, for the ticks of one target in one statement, all
        in one transaction; the coordinators whose job it wrote. A job written nothing (its lease lost, the job
        stopped), and every job when the store fails, is handed back: its own step finds out, and retries."""
        by_target = defaultdict(list)
        for coordinator, target, _ in ticks:
            by_target[target].append(coordinator)
        done = set()
        if ticks:
            try:
                with self.store.transaction(node=True) as conn:
                    for target, coordinators in by_target.items():
                        held = [(c.job_id, c.epoch) for c in coordinators]
                        ids = jobs.fence(conn, held, **values(target))
                        done |= {c for c in coordinators if c.job_id in ids}
            except Exception:
                done = set()
        for coordinator, _, _ in ticks:
            if coordinator not in done:
                self._hand_back(coordinator)
        return done

    def _write_round(self, ticks: list) -> None:
        """The resolved timestamps due of a round's `ticks`, on a worker (here when the ticker has none: a
        test): the files into local folders written at once by the node's file writer (`sinks/local_files.py`),
        any other by its sink; all recorded in one transaction, then every job's `resolving` let go (its own
        step records after). On a worker, so that the ticker's next round, which cuts what the node's watch
        found meanwhile, does not wait for hundreds of files. A job whose write failed is handed back."""
        try:
            dues = []
            for coordinator, target, at in ticks:
                try:
                    due = coordinator.resolved_due(target, at)
                except Exception:
                    self._hand_back(coordinator)
                    continue
                if due is not None:
                    dues.append(((coordinator, target, at), due))
            files = [due.file for _, due in dues if due.file is not None]
            try:
                failed = iter(self._put_once_each([(f.path, f.body) for f in files]))
            except OSError as error:
                failed = iter([str(error)] * len(files))
            written = []
            for tick, due in dues:
                try:
                    if due.file is None:
                        where = due.frontier.write_resolved(due.marks)
                    elif next(failed) is None:
                        where = due.file.name
                    else:
                        raise OSError("resolved file not written")
                    tick[0].resolved_written(due, where, lambda _write, tick=tick: written.append(tick))
                except Exception:  # its own step writes it again, and meets the error
                    self._hand_back(tick[0])
            self._fenced(written, checkpoints.resolved_values)
        finally:
            self._let_go([tick[0] for tick in ticks])

    def _resolve(self, coordinator, target, at: float) -> None:
        try:
            coordinator.ticked(target, at, lambda write: self.commits.run(coordinator.job_id, write))
        except Exception:
            self._hand_back(coordinator)
        finally:
            self._let_go([coordinator])

    def _let_go(self, coordinators: list) -> None:
        """The resolved timestamps of `coordinators` written and recorded: their `resolving` let go, and the
        ticker woken if one of them is due a tick meanwhile (`_next_due` left it out while it was held)."""
        now = time.time()
        due = False
        for coordinator in coordinators:
            coordinator.resolving.release()
            steady = coordinator.steady
            due = due or (steady is not None and not steady.waiting and steady.due_at <= now)
        if due:
            self._held_more.set()

    def _hand_back(self, coordinator) -> None:
        """The job steps on its own again: its coordinator's next turn."""
        self.drop(coordinator.job_id)
        coordinator.wake.set()


def _mark(target) -> dict:
    """A tick's values: the job's mark at `target`."""
    return {**checkpoints.mark_values(target), "running_status": ""}  # the mark moved: the job's note is over
