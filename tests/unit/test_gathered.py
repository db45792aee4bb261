"""Feeds' steps that read or write the store ask the node (`node/scheduler.py`'s `Gathered`), which answers what
they ask meanwhile together, on a real SQLite store: two hundred feeds' records are a few transactions on two
workers, each feed resumed with its own answer; an error of the store is thrown into every step that asked,
none of it committed; a step driven on its own thread is answered alone."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import insert, select, text

from feedctl.coordinator.wait import Ask, Wait, drive
from feedctl.node.scheduler import Gathered, Scheduler, Steps
from feedctl.state.schema import meta
from feedctl.state.store import StateStore


@pytest.fixture
def store(tmp_path):
    return StateStore(f"sqlite:///{tmp_path / 'state.db'}")


def _keys(store: StateStore) -> set[str]:
    with store.reading() as conn:
        return {k for (k,) in conn.execute(select(meta.c.key)) if k.startswith("k")}


def _put(conn, keys: list[str]) -> list[str]:
    """Every key asked in one statement; each ask's answer is its key, stored."""
    conn.execute(insert(meta), [{"key": k, "value": "v"} for k in keys])
    return keys


def _held(begun: threading.Event, hold: threading.Event):
    """`_put`, once `hold` is set; `begun` is set as the answer begins."""

    def put(conn, keys: list[str]) -> list[str]:
        begun.set()
        hold.wait(10)
        return _put(conn, keys)

    return put


def _feed(records: Gathered, n: int, answers: dict, wake: threading.Event, started: list | None = None):
    """A feed's steps: wait until woken, then record its batch, asking the node."""
    if started is not None:
        started.append(n)
    yield Wait(60.0, wake)
    answers[n] = yield Ask(records, n, f"k{n:03}")


def _until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.005)


def test_the_asks_of_many_feeds_steps_are_answered_together_in_a_few_transactions(store):
    scheduler, records, answers, started = Scheduler(2), Gathered(store, _put), {}, []
    try:
        wakes = [threading.Event() for _ in range(200)]
        steps = [Steps(_feed(records, n, answers, wake, started)) for n, wake in enumerate(wakes)]
        ends = [scheduler.add(task) for task in steps]
        _until(lambda: len(started) == 200)  # each waits to be woken
        for end in ends:  # a commit wakes them all at once
            scheduler.wake(end)
        _until(lambda: all(e.over.is_set() for e in ends))
    finally:
        scheduler.close()
    assert answers == {n: f"k{n:03}" for n in range(200)}, "each feed resumed with its own answer"
    assert _keys(store) == {f"k{n:03}" for n in range(200)}
    assert records.turns <= 20, f"{records.turns} transactions for 200 records: not gathered"
    assert all(task.error is None for task in steps)


def test_an_error_of_the_store_is_thrown_into_every_step_that_asked_and_nothing_is_committed(store):
    def failing(conn, keys):
        _put(conn, keys)
        conn.execute(text("SELECT * FROM no_such_table"))

    scheduler, records = Scheduler(1), Gathered(store, failing)
    caught = {}

    def feed(n):
        try:
            yield Ask(records, n, f"k{n}")
        except Exception as exc:
            caught[n] = type(exc).__name__
        return n

    try:
        steps = [Steps(feed(n)) for n in range(5)]
        ends = [scheduler.add(task) for task in steps]
        _until(lambda: all(e.over.is_set() for e in ends))
    finally:
        scheduler.close()
    assert caught == {n: "OperationalError" for n in range(5)} and [t.result for t in steps] == list(range(5))
    assert _keys(store) == set(), "the transaction rolled back"


def test_a_step_woken_while_it_waits_for_its_answer_takes_no_turn_until_answered(store):
    """The node's watch may wake a feed whose record is being written: it is resumed once, with its answer."""
    hold, begun = threading.Event(), threading.Event()
    scheduler, records, resumed = Scheduler(2), Gathered(store, _held(begun, hold)), []

    def feed():
        resumed.append((yield Ask(records, 1, "k1")))
        return "done"

    try:
        task = Steps(feed())
        end = scheduler.add(task)
        assert begun.wait(10)
        for _ in range(5):
            scheduler.wake(end)
        time.sleep(0.05)
        assert resumed == [] and not end.over.is_set()
        hold.set()
        _until(end.over.is_set)
    finally:
        hold.set()
        scheduler.close()
    assert resumed == ["k1"] and task.result == "done"


def test_a_wake_while_a_step_waits_for_its_answer_is_not_lost(store):
    """A batch cut while a feed's record is being written: the feed's next wait, for work, ends at once rather
    than after the minutes it asks for, since the wake that came meanwhile gave it no turn."""
    hold, begun, wake = threading.Event(), threading.Event(), threading.Event()
    scheduler, records, looked = Scheduler(2), Gathered(store, _held(begun, hold)), []

    def feed():
        yield Ask(records, 1, "k1")
        yield Wait(300.0, wake)  # for work: the cut meanwhile is that work
        looked.append(wake.is_set())

    try:
        end = scheduler.add(Steps(feed()))
        assert begun.wait(10)
        wake.set()
        scheduler.wake(end)  # as a job's `Wake` does
        hold.set()
        _until(end.over.is_set)
    finally:
        hold.set()
        scheduler.close()
    assert looked == [True]


def test_steps_driven_on_their_own_thread_are_answered_alone(store):
    records, answers = Gathered(store, _put), {}
    wake = threading.Event()
    wake.set()
    drive(_feed(records, 7, answers, wake))
    assert answers == {7: "k007"} and _keys(store) == {"k007"} and records.turns == 1


def test_an_ask_that_cannot_be_put_is_thrown_into_the_step_not_lost_with_its_task():
    """Whatever fails as a step asks is the step's to meet, as an answer's error would be: its task does not end
    silently on the worker (a node's feed would stop taking turns, and say nothing)."""

    class Broken:
        def put(self, steps, ask, scheduler):
            raise TypeError("no such answers")

    caught = []

    def feed():
        try:
            yield Ask(Broken(), 1, "k1")
        except TypeError as exc:
            caught.append(str(exc))
        return "done"

    scheduler = Scheduler(1)
    try:
        task = Steps(feed())
        end = scheduler.add(task)
        _until(end.over.is_set)
    finally:
        scheduler.close()
    assert caught == ["no such answers"] and task.result == "done"
