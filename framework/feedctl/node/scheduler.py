"""The node's scheduler: a fixed pool of workers running the turns of the node's tasks when they are due,
rather than a thread per task. A task is due when something woke it (`wake`: a new commit of a table it reads,
a batch emitted, its lease lost, the project changed) or when the wait its last turn asked for is over; what
wakes a task while it is queued or taking its turn is coalesced into one more turn. CockroachDB's rangefeeds
met the same wall and moved from a goroutine per range to a pool of workers (`rangefeed/scheduler.go`).

A turn does not sleep: a step that has to wait (a sink away, the store busy) says how long, and the worker
goes on to other tasks' turns meanwhile. Work written as one sequence of steps (a feed's runs on the node, its
spans emitting batch after batch) is a generator yielding a `Wait` where it would sleep: `Steps` takes its turns
on a scheduler, `coordinator.wait.drive` runs it on the caller's thread (a one-off run, a test). Where it reads or
writes the store it yields an `Ask` of a `Gathered`, whose turn answers every ask waiting in one snapshot or one
transaction: a commit read by a hundred feeds is a few transactions, not two hundred, on a few workers."""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from feedctl.coordinator.wait import Ask, Stepping, Wait
from feedctl.state.store import StateStore

PER_CORE = 4  # workers a core: a turn mostly waits on the state store, a table's log or a sink


def default_workers() -> int:
    return max(8, PER_CORE * (os.cpu_count() or 1))


class Task(Protocol):
    def turn(self) -> float | None:
        """One turn: seconds until the task is due again unless woken first; None once it is over."""


class Scheduled:
    """A task in the scheduler; `over` is set once its last turn returned, then `then` is called."""

    def __init__(self, task: Task, then: Callable[[], None] | None = None):
        self.task, self.then = task, then
        self.over = threading.Event()
        self._queued = self._running = self._again = False
        self._timer = 0  # its timer's generation: a wake or a new wait makes an older one stale


class Scheduler:
    def __init__(self, workers: int | None = None, name: str = "turns"):
        self.workers, self.name = workers or default_workers(), name
        self._lock = threading.Condition()
        self._ready: deque[Scheduled] = deque()
        self._timers: list[tuple[float, int, int, Scheduled]] = []  # (due, order, generation, task)
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def add(self, task: Task, wake=None, then: Callable[[], None] | None = None) -> Scheduled:
        """Schedule `task`, due at once; with `wake` (an event with an `on_set`, `JobCoordinator.Wake`), due
        whenever it is set; `then` is called once it is over. The pool starts with the first task."""
        scheduled = Scheduled(task, then)
        bind = getattr(task, "bind", None)
        if bind is not None:  # a task told where it runs: it wakes itself (`Steps`)
            bind(self, scheduled)
        if wake is not None:
            wake.on_set = lambda: self.wake(scheduled)
        with self._lock:
            if not self._threads:
                self._threads = [
                    threading.Thread(target=self._work, name=f"{self.name}-{n}", daemon=True)
                    for n in range(self.workers)
                ]
                for thread in self._threads:
                    thread.start()
            if not scheduled._queued:  # a wake meanwhile queued it
                self._queue(scheduled)
        return scheduled

    def wake(self, scheduled: Scheduled) -> None:
        """`scheduled` is due now: queued, or given one more turn after the one it is taking."""
        with self._lock:
            if scheduled.over.is_set():
                return
            if scheduled._running:
                scheduled._again = True
            elif not scheduled._queued:
                self._queue(scheduled)

    def close(self) -> None:
        """Stop the workers once their turns are over; tasks still scheduled take no more turns."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        for thread in self._threads:
            thread.join()

    def _queue(self, scheduled: Scheduled) -> None:
        scheduled._queued, scheduled._timer = True, scheduled._timer + 1
        self._ready.append(scheduled)
        self._lock.notify()

    def _next(self) -> Scheduled | None:
        """The next task due, once there is one (None: the scheduler closed)."""
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _, _, generation, scheduled = heapq.heappop(self._timers)
                    if generation == scheduled._timer and not scheduled._queued and not scheduled._running:
                        self._queue(scheduled)
                if self._ready:
                    scheduled = self._ready.popleft()
                    scheduled._queued, scheduled._running = False, True
                    return scheduled
                self._lock.wait(self._timers[0][0] - now if self._timers else None)
            return None

    def _work(self) -> None:
        while (scheduled := self._next()) is not None:
            try:
                wait = scheduled.task.turn()
            except BaseException:  # a task says its own errors: one that escapes ends it, never the worker
                wait = None
            with self._lock:
                scheduled._running = False
                if wait is None:
                    scheduled.over.set()
                elif scheduled._again:
                    scheduled._again = False
                    self._queue(scheduled)
                else:
                    scheduled._timer += 1
                    heapq.heappush(
                        self._timers, (time.monotonic() + wait, next(self._order), scheduled._timer, scheduled)
                    )
                    self._lock.notify()
            if wait is None and scheduled.then is not None:  # outside the lock: it may wake another task
                scheduled.then()


PARKED = 3600.0  # seconds a task waiting for an answer asks for: the answer wakes it


class Steps:
    """A generator of steps as a scheduler's task: each turn runs it to its next wait, or to its next ask, which
    parks it until answered (a wake meanwhile gives it no turn). `result` is what it returned, `error` what it
    raised (None while it runs, or when it returned)."""

    def __init__(self, steps: Stepping[object]):
        self.steps = steps
        self.result: object = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._asking = False
        self._answer: tuple[object, BaseException | None] = (None, None)
        self._scheduler: Scheduler | None = None
        self._scheduled: Scheduled | None = None

    def bind(self, scheduler: Scheduler, scheduled: Scheduled) -> None:
        self._scheduler, self._scheduled = scheduler, scheduled

    def answer(self, value: object, error: BaseException | None) -> None:
        """What it asked: its next turn resumes it with `value`, or throws `error` into it."""
        with self._lock:
            self._answer, self._asking = (value, error), False
        self._scheduler.wake(self._scheduled)

    def turn(self) -> float | None:
        with self._lock:
            if self._asking:
                return PARKED
            (value, error), self._answer = self._answer, (None, None)
        try:
            yielded = self.steps.send(value) if error is None else self.steps.throw(error)
        except StopIteration as end:
            self.result = end.value
            return None
        except BaseException as exc:
            self.error = exc
            return None
        if isinstance(yielded, Wait):
            # A wake that came while it waited for an answer gave it no turn: its event is still set.
            return 0.0 if yielded.on.is_set() else max(yielded.seconds, 0.0)
        with self._lock:
            self._asking = True
        try:
            yielded.by.put(self, yielded, self._scheduler)
        except Exception as exc:  # as if answered so: its next turn throws it into the steps
            self.answer(None, exc)
        return PARKED


class Gathered:
    """The asks of many tasks' steps (`Ask`) answered together, a turn at a time on the scheduler they run on:
    `together(conn, items)` answers a turn's items, in the order of their keys, in one snapshot (`reading`) or
    one transaction, each item's answer in order; an error answers them all. `alone` answers one item by
    itself (`drive`)."""

    def __init__(self, store: StateStore, together: Callable, reading: bool = False):
        self.store, self.together, self.reading = store, together, reading
        self._lock = threading.Lock()
        self._asked: list[tuple[Steps, Ask]] = []
        self._scheduled: Scheduled | None = None  # on the scheduler of the first steps asking
        self.turns = 0  # snapshots or transactions that answered asks, for the tests

    def put(self, steps: Steps, ask: Ask, scheduler: Scheduler) -> None:
        with self._lock:  # held while it is added: an ask meanwhile wakes it, none is left unanswered
            self._asked.append((steps, ask))
            if self._scheduled is None:
                self._scheduled = scheduler.add(self)
            else:
                scheduler.wake(self._scheduled)

    def alone(self, item):
        return self._answer([item])[0]

    def _answer(self, items: list) -> list:
        with (self.store.reading if self.reading else self.store.transaction)(node=True) as conn:
            answers = self.together(conn, items)
        self.turns += 1
        return answers

    def turn(self) -> float:
        with self._lock:
            asked, self._asked = self._asked, []
        if asked:
            asked.sort(key=lambda each: each[1].key)
            try:
                answers, error = self._answer([ask.item for _, ask in asked]), None
            except Exception as exc:
                answers, error = [None] * len(asked), exc
            for (steps, _), answer in zip(asked, answers, strict=True):
                steps.answer(answer, error)
        return PARKED
