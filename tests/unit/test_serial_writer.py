"""A SQLite store's writers in one process take turns on one connection in the order they came, the node's
renewals ahead; a writer that raises writes nothing and fails no other; another process's writer is waited
for, up to a timeout."""

from __future__ import annotations

import sqlite3
import threading
import time
from functools import partial

import pytest
from sqlalchemy import text

from feedctl.state.store import StateStore


def _wait_until(condition) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.001)


@pytest.fixture
def store(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)
    with store.transaction() as conn:
        conn.execute(text("CREATE TABLE t (writer TEXT PRIMARY KEY)"))
    yield store
    store.close()


def _committed(store: StateStore) -> set[str]:
    """What another connection sees: only committed rows."""
    with sqlite3.connect(store.url.removeprefix("sqlite:///")) as other:
        return {r[0] for r in other.execute("SELECT writer FROM t")}


def _held_turn(store: StateStore):
    """The turn taken by this thread, as a writer inside its transaction would hold it."""
    serial = store._serial
    serial._take_turn(False)
    return serial


def _queued(serial, *writers) -> list[threading.Thread]:
    """Each writer started on a thread of its own, and queued for the turn before the next starts."""
    threads = []
    for writer in writers:
        threads.append(threading.Thread(target=writer))
        threads[-1].start()
        _wait_until(lambda n=len(threads): len(serial._waiting) == n)
    return threads


def test_forty_writers_at_once_each_return_once_their_write_is_committed(store):
    seen, errors = {}, []

    def write(name: str) -> None:
        try:
            with store.transaction() as conn:
                conn.execute(text("INSERT INTO t VALUES (:w)"), {"w": name})
            seen[name] = name in _committed(store)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and seen == {f"w{i}": True for i in range(40)}
    assert _committed(store) == {f"w{i}" for i in range(40)}


def test_writers_take_turns_in_the_order_they_came_and_a_renewal_goes_ahead_of_those_waiting(store):
    serial, order = _held_turn(store), []

    def write(name: str, renewal: bool = False) -> None:
        with store.renewing() if renewal else store.transaction() as conn:
            conn.execute(text("INSERT INTO t VALUES (:w)"), {"w": name})
            order.append(name)

    threads = _queued(serial, *(partial(write, name) for name in ("b", "c", "d")), partial(write, "heartbeat", True))
    serial._pass_turn()
    write("a")  # at once again: with a plain lock, this thread could take it back before the others woke
    for thread in threads:
        thread.join()
    assert order == ["heartbeat", "b", "c", "d", "a"]
    assert _committed(store) == {"heartbeat", "a", "b", "c", "d"}
    assert not serial._turn_taken


def test_a_writer_that_raises_writes_nothing_and_the_others_are_committed(store):
    serial, outcome = _held_turn(store), {}

    def write(name: str) -> None:
        try:
            with store.transaction() as conn:
                conn.execute(text("INSERT INTO t VALUES (:w)"), {"w": name})
                if name == "bad":
                    raise ValueError("refused")
            outcome[name] = "written"
        except ValueError:
            outcome[name] = "raised"

    threads = _queued(serial, *(partial(write, name) for name in ("a", "bad", "c")))
    serial._pass_turn()
    for thread in threads:
        thread.join()
    assert outcome == {"a": "written", "bad": "raised", "c": "written"}
    assert _committed(store) == {"a", "c"}


def test_a_writer_waits_for_another_process_holding_the_write_lock_and_gives_up_at_its_timeout(store):
    other = sqlite3.connect(store.url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    store._serial.timeout = 0.3
    began = time.monotonic()
    with pytest.raises(Exception, match="locked"), store.transaction() as conn:
        conn.execute(text("INSERT INTO t VALUES ('late')"))
    assert time.monotonic() - began >= 0.3
    assert not store._serial._turn_taken  # the turn is not left with a writer gone
    store._serial.timeout = 30.0
    threading.Timer(0.3, other.rollback).start()
    with store.transaction() as conn:  # taken once the other process lets the lock go
        conn.execute(text("INSERT INTO t VALUES ('in time')"))
    assert _committed(store) == {"in time"}
    other.close()


def test_a_write_transaction_begun_inside_another_on_the_same_thread_is_refused_rather_than_waiting_for_itself(
    store,
):
    with store.transaction() as conn:
        conn.execute(text("INSERT INTO t VALUES ('outer')"))
        with pytest.raises(RuntimeError, match="inside another"), store.transaction():
            pass
    assert _committed(store) == {"outer"}
