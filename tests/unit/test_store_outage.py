"""The state store away, as a node's loops meet it: waits that grow with the outage up to the cap, and a node's
log that says it once, once a minute and once over, however many feeds meet it."""

from __future__ import annotations

import threading
import time

from feedctl.coordinator.store_outage import SAY_AGAIN, StoreOutage
from feedctl.coordinator.wait import drive, pause


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def outage(first: float = 1.0, cap: float = 30.0):
    said, clock = [], Clock()
    return StoreOutage(lambda message, **fields: said.append(fields), first, cap, clock), said, clock


def test_each_wait_is_as_long_as_the_outage_so_far_from_the_first_wait_to_the_cap():
    store, _, clock = outage(first=1.0, cap=30.0)
    waits = []
    for _ in range(8):
        waits.append(store.failed("orders", "connection refused"))
        clock.now += waits[-1]
    assert waits == [1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    store.worked()
    assert store.failed("orders", "connection refused") == 1.0, "a new outage starts from the first wait"


def test_five_hundred_feeds_meeting_one_outage_make_three_lines_over_two_minutes():
    store, said, clock = outage()
    for second in range(125):
        for feed in range(500):
            store.failed(f"f{feed}", "connection refused")
        clock.now += 1
    store.worked()
    store.worked()  # every feed's next step works: said once
    assert [s["event"] for s in said] == ["store_away", "store_away", "store_away", "store_back"]
    assert [s["away_seconds"] for s in said] == [0, SAY_AGAIN, 2 * SAY_AGAIN, 125]


def test_a_busy_store_failing_now_and_then_is_said_at_most_once_a_minute_with_its_end():
    store, said, clock = outage()
    for _ in range(100):  # 100 short outages, a second apart
        store.failed("orders", "database is locked")
        clock.now += 0.2
        store.worked()
        clock.now += 0.8
    assert [s["event"] for s in said] == ["store_away", "store_back", "store_away", "store_back"]


def test_waiting_ends_early_when_the_node_stops():
    store, _, _ = outage(first=60.0)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    started = time.monotonic()
    assert drive(pause(store.failed("orders", "connection refused"), stop)) is False
    assert time.monotonic() - started < 30, "not the outage's wait of a minute"


def test_a_pause_lasts_its_time_whatever_wakes_the_steps_meanwhile():
    stop, woken = threading.Event(), []

    def steps():
        done = yield from pause(0.2, stop)
        return done

    started, task = time.monotonic(), steps()
    wait = next(task)
    while True:  # each wait ends at once, as a wake of the task on a scheduler would end it
        woken.append(wait)
        try:
            wait = task.send(None)
        except StopIteration as end:
            assert end.value is True
            break
        time.sleep(0.01)
    assert time.monotonic() - started >= 0.2 and len(woken) > 2
