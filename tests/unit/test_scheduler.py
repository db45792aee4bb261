"""The node's scheduler: a fixed pool of workers taking tasks' turns when woken or when their wait is over,
coalescing what wakes a task while it is queued or taking its turn; and a coordinator's retries on it, which
wait by asking for a later turn rather than sleeping on a worker."""

from __future__ import annotations

import threading
import time

import pytest

from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.wait import Wait, Wake, drive
from feedctl.errors import ErrorKind, RetryLater, Unavailable
from feedctl.node.scheduler import Scheduler, Steps
from feedctl.options import resolve
from feedctl.spark.place import SparkPlace
from feedctl.units import Hlc


def _until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.005)


class Counting:
    """A task whose turns are counted; each asks for its next in `wait` seconds, and the last ends it."""

    def __init__(self, turns: int | None = None, wait: float = 60.0, hold: threading.Event | None = None):
        self.turns, self.wait, self.hold = 0, wait, hold
        self.last, self.started = turns, threading.Event()

    def turn(self):
        self.turns += 1
        self.started.set()
        if self.hold is not None:
            self.hold.wait(5)
        return None if self.last is not None and self.turns >= self.last else self.wait


def test_a_task_takes_a_turn_at_once_then_when_woken_and_its_last_turn_ends_it():
    scheduler = Scheduler(2)
    try:
        wake = Wake()
        task = Counting(turns=3)
        scheduled = scheduler.add(task, wake)
        _until(lambda: task.turns == 1)
        time.sleep(0.05)
        assert task.turns == 1, "no turn before its wait of a minute is over, unless woken"
        wake.set()
        _until(lambda: task.turns == 2)
        wake.set()
        _until(scheduled.over.is_set)
        assert task.turns == 3
        wake.set()  # woken once over: no turn
        time.sleep(0.05)
        assert task.turns == 3
    finally:
        scheduler.close()


def test_a_task_is_due_again_once_the_wait_its_turn_asked_for_is_over():
    scheduler = Scheduler(1)
    try:
        task = Counting(turns=4, wait=0.02)
        scheduled = scheduler.add(task)
        _until(scheduled.over.is_set)
        assert task.turns == 4
    finally:
        scheduler.close()


def test_wakes_during_a_turn_are_coalesced_into_one_more_turn():
    scheduler = Scheduler(2)
    hold = threading.Event()
    try:
        wake = Wake()
        task = Counting(hold=hold)
        scheduler.add(task, wake)
        task.started.wait(5)
        for _ in range(5):
            wake.set()
        hold.set()
        _until(lambda: task.turns == 2)
        time.sleep(0.05)
        assert task.turns == 2, "five wakes during a turn are one turn more"
    finally:
        hold.set()
        scheduler.close()


def test_a_task_takes_one_turn_at_a_time_and_a_busy_worker_holds_up_no_other_task():
    """Many tasks, few workers: one whose turn blocks holds only its worker; closed, the workers are gone."""
    scheduler = Scheduler(2, name="busy")
    hold = threading.Event()
    try:
        slow = Counting(hold=hold)
        scheduler.add(slow)
        slow.started.wait(5)
        others = [Counting(turns=1) for _ in range(50)]
        ends = [scheduler.add(task) for task in others]
        _until(lambda: all(e.over.is_set() for e in ends))
        assert all(task.turns == 1 for task in others) and slow.turns == 1
        assert len([t for t in threading.enumerate() if t.name.startswith("busy-")]) == 2
    finally:
        hold.set()
        scheduler.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("busy-")]


def test_a_turn_that_raises_ends_its_task_and_not_the_worker():
    scheduler = Scheduler(1)

    class Broken:
        def turn(self):
            raise RuntimeError("a bug")

    try:
        broken = scheduler.add(Broken())
        _until(broken.over.is_set)
        task = Counting(turns=1)
        _until(scheduler.add(task).over.is_set)
    finally:
        scheduler.close()


def _feed(wake: Wake, seen: list, batches: int):
    """A feed's steps as a runner writes them: emit what there is, then wait until woken."""
    for batch in range(batches):
        seen.append(batch)
        wake.clear()
        yield Wait(60.0, wake)
    return len(seen)


def test_generators_of_steps_take_turns_on_a_few_workers_however_many_they_are():
    """Two hundred feeds waiting for their next batch hold no thread: each step runs when its wake is set, and
    each feed's result and the call once it is over come back."""
    scheduler = Scheduler(2, name="feeds")
    before = threading.active_count()
    try:
        wakes, seen, over = [Wake() for _ in range(200)], [[] for _ in range(200)], []
        steps = [Steps(_feed(wake, mine, 3)) for wake, mine in zip(wakes, seen)]
        ends = [
            scheduler.add(task, wake, then=lambda n=n: over.append(n))
            for n, (task, wake) in enumerate(zip(steps, wakes))
        ]
        _until(lambda: all(mine == [0] for mine in seen))
        assert threading.active_count() == before + 2, "the pool's two workers, no thread a feed"
        for turns in (2, 3, 3):  # each wake a turn: its next batch, then its end
            for wake in wakes:
                wake.set()
            _until(lambda turns=turns: all(len(mine) == turns for mine in seen))
        _until(lambda: all(e.over.is_set() for e in ends))
        assert {task.result for task in steps} == {3} and sorted(over) == list(range(200))
    finally:
        scheduler.close()


def test_steps_that_raise_keep_their_error_and_steps_driven_on_a_thread_sleep_through_their_waits():
    def broken():
        yield Wait(0.0, threading.Event())
        raise RuntimeError("a bug")

    scheduler = Scheduler(1)
    try:
        task = Steps(broken())
        _until(scheduler.add(task).over.is_set)
        assert isinstance(task.error, RuntimeError) and task.result is None
    finally:
        scheduler.close()
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()

    def waiting():
        yield Wait(30.0, stop)
        return stop.is_set()

    started = time.monotonic()
    assert drive(waiting()) is True and time.monotonic() - started < 10, "the wait ends once its event is set"


OPTIONS = resolve({}, None, has_query=False)


def _retrying(said: list, stop: threading.Event, outages_last: bool, retries: int = 2) -> Retrying:
    return Retrying(
        "orders",
        "n1",
        retries,
        Backoff(0.5, 4.0, lambda: Hlc(0)),
        None,
        SparkPlace("local[2]"),
        stop,
        lambda: OPTIONS,
        lambda message, **fields: said.append((fields.get("event"), message)),
        outages_last=outages_last,
    )


def test_a_step_on_the_scheduler_waits_out_an_outage_by_asking_for_a_later_turn():
    """Each failure asks for a later turn, the waits doubling as the blocking retries' do; the outage is said
    once and its end once; attempts count across turns until the step works."""
    said = []
    later = _retrying(said, threading.Event(), outages_last=True).later()
    waits = []

    def away():
        raise Unavailable("broker 127.0.0.1:9092 unreachable")

    for _ in range(4):
        with pytest.raises(RetryLater) as raised:
            later("resolved", away)
        waits.append(raised.value.wait)
        assert later.classify(raised.value).kind == ErrorKind.WAITING
    assert waits == [0.5, 1.0, 2.0, 4.0]
    assert later("resolved", lambda: "written") == "written"
    assert [event for event, _ in said] == ["outage", "outage_over"]


def test_what_a_retry_may_fix_is_tried_a_few_times_across_turns_then_raised():
    later = _retrying([], threading.Event(), outages_last=False, retries=2).later()

    def flaky():
        raise OSError("a file went missing")

    for _ in range(2):
        with pytest.raises(RetryLater):
            later("planning", flaky)
    with pytest.raises(OSError):
        later("planning", flaky)


def test_a_draining_node_leaves_a_step_that_meets_an_outage_to_the_next_node():
    """Stopping, a retry neither waits nor fails the job: the step is left, and the job with it."""
    stop = threading.Event()
    stop.set()
    later = _retrying([], stop, outages_last=True).later()

    def away():
        raise Unavailable("endpoint away")

    with pytest.raises(RetryLater) as raised:
        later("resolved", away)
    assert raised.value.wait == 0.0
