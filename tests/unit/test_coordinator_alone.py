"""The coordinator of a job, stepped alone over real Delta tables with the test playing the nodes (no Spark):
what it cuts, places and checkpoints, and how many write transactions a step takes."""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake

from feedctl.coordinator.job_share import SHED_EVERY
from feedctl.coordinator.knobs import TestingKnobs
from feedctl.coordinator.steady import LOOK_AGAIN
from feedctl.job.definition import definition_of
from feedctl.node import share
from feedctl.node.share import Batch, next_batch
from feedctl.node.ticker import Ticker
from feedctl.node.watch import NodeWatch
from feedctl.state import batch_intents, checkpoints, event_times, jobs, nodes, spans
from feedctl.state.batch_intents import IntentKind
from feedctl.units import Hlc
from support.coordinating import CoordinatorAlone
from support.e2e import file_sink, write_feeds, write_project
from support.projects import write_delta


def _append(path, *ids: int) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}), mode="append")


@pytest.fixture
def project(tmp_path):
    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    feed = {"name": "f", "tables": ["s.t"], "sink": "out", "options": {"resolved": "0s", "updated": True}}
    root = write_project(
        tmp_path / "p", {"t": {"path": str(path), "primary_key": ["id"], "spans": 3}}, [feed], [file_sink("out")]
    )
    return root, path


def test_the_initial_scan_then_each_commit_is_a_batch_the_high_water_mark_moves_past(project):
    root, path = project
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        [scan] = alone.intents()
        assert scan.kind == IntentKind.SCAN and scan.ranges == {"s.t": (-1, 0)}
        assert alone.emit() == scan.batch_seq
        _append(path, 2, 3)
        alone.step()
        assert alone.job().high_water == scan.target and alone.job().initial_scan_done
        [changes] = alone.intents()
        assert changes.kind == IntentKind.CHANGES and changes.ranges == {"s.t": (0, 1)}
        assert alone.emit() == changes.batch_seq
        alone.step()
        assert alone.job().high_water >= changes.target
        assert any(e.get("event") == "resolved" for e in alone.events)


def test_a_watched_coordinator_cuts_up_to_the_version_its_node_s_watch_found_else_up_to_the_table_s_log(project):
    root, path = project
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        alone.emit()  # the initial scan, at version 0
        _append(path, 2)
        _append(path, 3)  # versions 1 and 2
        alone.coordinator.newest = lambda source, within: 1  # the watch's last look found version 1
        alone.step()
        [first] = alone.intents()
        assert first.ranges == {"s.t": (0, 1)}
        alone.emit()
        alone.coordinator.newest = lambda source, within: None  # no look of the watch recent enough
        alone.step()
        [second] = alone.intents()
        assert second.ranges == {"s.t": (1, 2)}


def test_a_following_coordinator_leaves_a_free_lease_to_a_peer_holding_fewer_then_claims_it_if_still_free(
    project, monkeypatch
):
    from feedctl.coordinator import job_share

    root, _ = project
    monkeypatch.setattr(job_share, "LEAVE_FOR", 0.5)
    with CoordinatorAlone(root, "f") as alone:
        coordinator = alone.coordinator
        coordinator.release()
        alone.join("n2")  # a live node working the feed, holding no lease
        with alone.store.transaction() as conn:  # this node coordinates two other feeds' jobs
            nodes.publish_view(conn, "n2", "f", "its view", 0)  # its runner of the feed is up
            for feed in ("g", "h"):
                other = jobs.create_job(conn, feed, "sha256:x", definition_of(alone.job()), "file://x", Hlc(1), {})
                jobs.claim_lease(conn, other.job_id, coordinator.holder, 60)
        coordinator.watched = True
        coordinator.epoch = coordinator.claim()
        assert coordinator.epoch is not None  # a one-off run's claim leaves nothing to anyone
        coordinator.release()
        began = time.monotonic()
        assert coordinator.claim(share=True) is None
        poll = alone.settings.poll_interval
        assert coordinator.nap() <= max(0.5, poll)  # it looks again once it has left it long enough
        while (epoch := coordinator.claim(share=True)) is None:
            assert time.monotonic() - began < 10, "the lease left to a peer was never claimed"
            time.sleep(0.05)
        assert time.monotonic() - began >= 0.5
        coordinator.epoch = epoch
        assert coordinator.nap() > max(0.5, poll)  # coordinating now: no longer waiting for a peer


def test_a_following_coordinator_hands_its_job_to_a_peer_coordinating_two_fewer_and_stands_by(project, monkeypatch):
    from feedctl.coordinator import job_share

    root, _ = project
    monkeypatch.setattr(job_share, "SHED_EVERY", 0.0)
    with CoordinatorAlone(root, "f") as alone:
        coordinator = alone.coordinator
        alone.step()
        alone.join("n2")
        with alone.store.transaction() as conn:
            for feed in ("g", "h"):  # this node coordinates two other feeds' jobs too
                other = jobs.create_job(conn, feed, "sha256:x", definition_of(alone.job()), "file://x", Hlc(1), {})
                jobs.claim_lease(conn, other.job_id, coordinator.holder, 60)
        assert not coordinator.shed()  # n2's runner of the feed is not up yet: no peer
        with alone.store.transaction() as conn:
            nodes.publish_view(conn, "n2", "f", "its view", 0)
        assert coordinator.shed() and coordinator.epoch is None
        assert alone.job().coordinator == alone.nodes["n2"].holder
        [handed] = alone.said("handed_over")
        assert handed["node"] == "n2"


def test_a_step_in_steady_state_opens_few_write_transactions(project):
    """Measured, not timed: how many times a step takes the store's write lock, a commit waiting."""
    root, path = project
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        alone.emit()
        counts = []
        for i in range(4):
            _append(path, 10 + i)
            alone.transactions.reset()
            alone.step()  # checkpoints the batch emitted, writes resolved, cuts the new commit
            counts.append(alone.transactions.writes)
            assert alone.emit() is not None
        print("write transactions per step:", counts)
        # the checkpoint of what was emitted, the resolved timestamp it reports, the cut of the new commit; the
        # next resolved timestamp is due after min_checkpoint_frequency, so later steps checkpoint and cut alone
        # (a step took 10 to 12 before the coordinator decided first and applied in one transaction)
        assert counts[0] <= 3 and max(counts[1:]) <= 2, counts


def _resolving_feed(tmp_path) -> Path:
    """A project of one table of one row and its feed `f`, resolved every second, with no initial scan."""
    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    feed = {"name": "f", "tables": ["s.t"], "sink": "out", "options": {"resolved": "1s", "initial_scan": "no"}}
    return write_project(tmp_path / "p", {"t": {"path": str(path), "primary_key": ["id"]}}, [feed], [file_sink("out")])


def _steady(alone: CoordinatorAlone, ticker: Ticker) -> None:
    """The job watched by its node and ticked by `ticker`, stepped until it is steady (nothing to cut)."""
    alone.coordinator.watched, alone.coordinator.ticker = True, ticker
    for _ in range(5):
        alone.step()
        alone.emit()
        if alone.coordinator.steady is not None:
            return
    raise AssertionError("the job never became steady")


def _tick_when_due(ticker: Ticker, *alone: CoordinatorAlone) -> None:
    due = max(a.coordinator.steady.due_at for a in alone)
    time.sleep(max(due - time.time(), 0))
    ticker.tick(time.time())


def test_a_watched_job_with_nothing_to_do_ticks_with_no_read_and_a_wake_makes_it_look_again(tmp_path):
    """Between wakes of its node's watch (`node/watch.py`), a job whose last step found nothing to cut and
    nothing waiting is ticked by the node's ticker: its mark moves and its resolved timestamp is written, with
    no read of the store or of the table. A commit the tick did not look at is cut once the watch wakes the
    job, above the ticked mark."""
    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    options = {"resolved": "0s", "min_checkpoint_frequency": "0s"}
    feed = {"name": "f", "tables": ["s.t"], "sink": "out", "options": options}
    root = write_project(tmp_path / "p", {"t": {"path": str(path), "primary_key": ["id"]}}, [feed], [file_sink("out")])
    with CoordinatorAlone(root, "f", poll_interval=0.2) as alone:
        ticker = Ticker(alone.store)
        _steady(alone, ticker)
        assert not alone.intents()
        _append(path, 2)
        ticks = []
        for _ in range(3):
            before, resolved = alone.job().high_water, len(alone.said("resolved"))
            alone.transactions.reset()
            _tick_when_due(ticker, alone)
            ticks.append((alone.transactions.reads, alone.transactions.writes))
            assert alone.job().high_water > before and len(alone.said("resolved")) == resolved + 1
        assert ticks == [(0, 2)] * 3  # the mark, then the resolved timestamp it reports
        assert not alone.intents()
        ticked = alone.job().high_water
        alone.coordinator.wake.set()  # the node's watch saw the table's new version
        ticker.tick(alone.coordinator.steady.due_at)
        assert alone.job().high_water == ticked  # woken: its own thread steps it, not the ticker
        alone.step()
        [changes] = alone.intents()
        assert changes.ranges == {"s.t": (0, 1)} and changes.target > ticked
        alone.emit()
        alone.step()
        assert alone.job().high_water >= changes.target


def _three_feeds_over_one_table(tmp_path, **options):
    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    options = {"resolved": "0s", "min_checkpoint_frequency": "0s", **options}
    feeds = [{"name": n, "tables": ["s.t"], "sink": n, "options": options} for n in ("a", "b", "c")]
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(path), "primary_key": ["id"]}},
        feeds,
        [file_sink(n) for n in ("a", "b", "c")],
    )
    return root, path


@contextmanager
def _three_steady_jobs(tmp_path):
    """Three feeds' jobs over one table, each steady and held by one ticker: (the three, the ticker, the
    table's path)."""
    root, path = _three_feeds_over_one_table(tmp_path)
    alone = [CoordinatorAlone(root, n, poll_interval=0.2) for n in ("a", "b", "c")]
    try:
        ticker = Ticker(alone[0].store)
        for one in alone:
            _steady(one, ticker)
        yield alone, ticker, path
    finally:
        for one in alone:
            one.close()


def test_the_ticker_cuts_a_commit_for_every_steady_job_reading_its_table_then_takes_the_batches_emitted(tmp_path):
    """A commit the node's watch finds is cut for the steady jobs reading its table by the ticker, as their
    steps would cut it, in one write and no read; once a job's spans on the node emitted its batch, the ticker
    takes it into the job's mark, many jobs' in one write, and writes their resolved timestamps. A job whose
    spans have not said so waits; its own step takes the batch as ever."""
    with _three_steady_jobs(tmp_path) as (alone, ticker, path):
        _append(path, 2, 3)
        seen = {"version": 0}
        for one in alone:
            one.coordinator.newest = lambda source, within: seen["version"]
            one.coordinator.cut.clear()
        counted = alone[0].transactions
        ticker.tick(time.time())
        assert all(not one.intents() for one in alone)  # the watch has not found the commit yet
        marks = [one.job().high_water for one in alone]
        seen["version"] = 1
        woken = [one.coordinator.wake.count for one in alone]
        counted.reset()
        ticker.tick(time.time())
        assert (counted.reads, counted.writes) == (0, 1)
        cut = []
        for one, mark, wakes in zip(alone, marks, woken):
            [changes] = one.intents()
            assert changes.ranges == {"s.t": (0, 1)} and changes.target > mark
            with one.store.reading() as conn:
                [recorded] = event_times.recorded_after(conn, one.job_id, "s.t", 0)
            assert recorded.version == 1 and mark < recorded.event_ts <= changes.target
            coordinator = one.coordinator
            assert coordinator.steady.waiting == (changes,) and coordinator.cut.is_set()
            assert coordinator.wake.count == wakes  # its own thread sleeps on
            assert one.emit() == changes.batch_seq
            cut.append(changes)
        for one in alone[:2]:
            one.coordinator.batch_emitted()  # as the node's spans of the feed say once they recorded it
        resolved = [len(one.said("resolved")) for one in alone]
        counted.reset()
        ticker.tick(time.time())
        assert (counted.reads, counted.writes) == (1, 2)  # the jobs' spans; their marks, their resolved records
        for one, changes in zip(alone[:2], cut):
            assert not one.intents() and one.job().high_water >= changes.target
            assert one.coordinator.steady.waiting == ()
        assert [len(one.said("resolved")) for one in alone] == [resolved[0] + 1, resolved[1] + 1, resolved[2]]
        assert alone[2].intents() == [cut[2]] and alone[2].job().high_water < cut[2].target
        alone[2].step()
        assert not alone[2].intents() and alone[2].job().high_water >= cut[2].target


def test_a_commit_that_changes_the_schema_is_cut_by_the_job_s_own_step_not_by_the_ticker(tmp_path):
    root, path = _three_feeds_over_one_table(tmp_path)
    with CoordinatorAlone(root, "a", poll_interval=0.2) as alone:
        ticker = Ticker(alone.store)
        _steady(alone, ticker)
        write_deltalake(
            str(path),
            pa.table({"id": pa.array([2], pa.int64()), "v": ["b"], "w": ["new"]}),
            mode="append",
            schema_mode="merge",
        )
        alone.coordinator.newest = lambda source, within: 1
        woken = alone.coordinator.wake.count
        ticker.tick(time.time())
        assert not alone.intents() and alone.coordinator.wake.count > woken  # handed back to its thread
        alone.step()
        [changes] = alone.intents()
        assert changes.ranges == {"s.t": (0, 1)} and "s.t" in changes.schema_changes  # cut as a change


def test_a_watched_job_that_takes_its_last_batch_is_steady_at_once_and_ticks_when_time_passes_its_mark(tmp_path):
    """The step that checkpoints a watched job's last batch leaves moving time on to the node's ticker, which
    writes many jobs' marks at once: the mark stays at the batch's target in that step, and the first tick
    comes as soon as the closed timestamp passes it, long before the resolved interval is over."""
    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    feed = {"name": "f", "tables": ["s.t"], "sink": "out", "options": {"resolved": "60s", "initial_scan": "no"}}
    root = write_project(tmp_path / "p", {"t": {"path": str(path), "primary_key": ["id"]}}, [feed], [file_sink("out")])
    with CoordinatorAlone(root, "f", poll_interval=0.2, closed_lag=1.0) as alone:
        ticker = Ticker(alone.store)
        _steady(alone, ticker)
        _append(path, 2)
        alone.coordinator.wake.set()
        alone.step()  # the commit's batch
        [changes] = alone.intents()
        assert alone.emit() == changes.batch_seq
        alone.transactions.reset()
        alone.step()
        steady = alone.coordinator.steady
        assert steady is not None and alone.job().high_water == changes.target
        # the batch's checkpoint and the resolved timestamp it reports: no second checkpoint for time alone
        assert alone.transactions.writes == 2
        passes = changes.target.wall / 1e9 + 1.0  # when the closed timestamp passes the mark
        assert passes <= steady.due_at <= max(passes, time.time()) + 0.2  # on the poll interval's grid
        _tick_when_due(ticker, alone)
        assert alone.job().high_water > changes.target


def test_a_job_whose_step_cut_a_batch_stays_with_the_ticker_which_takes_the_batch_once_emitted(tmp_path):
    """A batch cut by the job's own step (woken, or looking again) waits in a steady job: the job's thread
    sleeps past its resolved interval, and the node's ticker takes the batch once the job's spans emitted it.
    Under load, every step would find the next commit's batch waiting: a job that had to be left with nothing
    waiting to be ticked would never leave its own thread again."""
    root = _resolving_feed(tmp_path)
    with CoordinatorAlone(root, "f", poll_interval=0.2) as alone:
        ticker = Ticker(alone.store)
        _steady(alone, ticker)
        _append(tmp_path / "data" / "t", 2)  # the table of _resolving_feed
        alone.step()
        [changes] = alone.intents()
        assert alone.coordinator.steady.waiting == (changes,)
        # It sleeps until its look again, or until it looks at handing the job over, which it does without a
        # step: not the resolved interval.
        assert alone.coordinator.nap() >= min(LOOK_AGAIN, SHED_EVERY) / 2 - 1
        assert not alone.coordinator.due_a_step()
        ticker.tick(time.time())
        assert alone.intents() == [changes]  # not emitted yet: nothing is taken
        assert alone.emit() == changes.batch_seq
        alone.coordinator.batch_emitted()  # as the node's spans of the feed say once they recorded it
        woken = alone.coordinator.wake.count
        ticker.tick(time.time())
        assert not alone.intents() and alone.job().high_water >= changes.target
        assert alone.coordinator.steady.waiting == () and alone.coordinator.wake.count == woken
        alone.coordinator.wake.set()  # as the node's watch does when the job changed
        assert alone.coordinator.due_a_step()


def test_a_steady_coordinator_whose_lease_is_taken_stands_by_within_its_lease_not_at_its_next_look(tmp_path):
    """A steady job's coordinator naps until its look again (minutes): a node that took its lease meanwhile (this
    one paused past the lease's time to live) must not have two coordinators for that long. The renewal that
    finds the lease gone wakes the coordinator, which stands by."""
    import threading

    from feedctl.coordinator import following
    from feedctl.node.scheduler import Scheduler

    root = _resolving_feed(tmp_path)
    with CoordinatorAlone(root, "f", poll_interval=0.2, lease_ttl=0.6) as alone:
        coordinator = alone.coordinator
        _steady(alone, Ticker(alone.store))
        coordinator.release()
        alone.join("n2")
        stop, done = threading.Event(), threading.Event()
        scheduler = Scheduler(2)
        turns = scheduler.add(following.Turns(coordinator, stop, done), coordinator.wake)
        try:
            deadline = time.monotonic() + 10
            while not (alone.said("coordinating") and coordinator.steady is not None):
                assert time.monotonic() < deadline, "the coordinator never claimed the job and became steady"
                time.sleep(0.05)
            assert coordinator.nap() > 10  # its next look, or look at handing the job over, is far off
            with alone.store.transaction() as conn:
                assert jobs.hand_lease(conn, alone.job_id, coordinator.epoch, alone.nodes["n2"].holder, 60)
            deadline = time.monotonic() + 5  # a renewal every third of 0.6 s
            while not alone.said("lease_lost"):
                assert time.monotonic() < deadline, "the coordinator kept its job after its lease was taken"
                time.sleep(0.05)
            assert alone.job().coordinator == alone.nodes["n2"].holder
        finally:
            stop.set()
            coordinator.wake.set()
            turns.over.wait(10)
            scheduler.close()
        assert turns.over.is_set() and coordinator.error is None


def test_a_following_coordinator_whose_step_meets_a_store_failure_keeps_its_lease_and_steps_again(tmp_path):
    """A busy node's step may wait past the pool's timeout for a connection: its coordinator says so and steps
    again, holding the lease all along, rather than releasing it for another node to take the job up."""
    import threading

    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from feedctl.coordinator import following
    from feedctl.node.scheduler import Scheduler

    root = _resolving_feed(tmp_path)
    with CoordinatorAlone(root, "f", poll_interval=0.2, lease_ttl=3) as alone:
        coordinator = alone.coordinator
        coordinator.release()
        real, steps = coordinator.step, []

        def step():
            steps.append(time.monotonic())
            if len(steps) == 2:
                raise PoolTimeout("QueuePool limit of size 5 overflow 10 reached, connection timed out")
            return real()

        coordinator.step = step
        stop, done = threading.Event(), threading.Event()
        scheduler = Scheduler(2)
        turns = scheduler.add(following.Turns(coordinator, stop, done), coordinator.wake)
        try:
            deadline = time.monotonic() + 10
            while not steps:
                assert time.monotonic() < deadline, "the coordinator never claimed the job and stepped"
                time.sleep(0.05)
            epoch = alone.job().lease_epoch
            while len(steps) < 3 or not alone.said("store_back"):  # said once the step after the failure worked
                coordinator.wake.set()  # as the node's watch does when the job changed
                assert time.monotonic() < deadline, "the coordinator did not step again after the failure"
                time.sleep(0.05)
            [away] = alone.said("store_away")
            assert "QueuePool limit" in away["message"] and len(alone.said("store_back")) == 1
            job = alone.job()
            assert (job.coordinator, job.lease_epoch) == (coordinator.holder, epoch)
            assert len(alone.said("coordinating")) == 1 and not alone.said("lease_lost")
        finally:
            stop.set()
            coordinator.wake.set()
            turns.over.wait(10)
            scheduler.close()
        assert turns.over.is_set() and coordinator.error is None


def test_the_ticker_cuts_a_commit_found_while_a_batch_waits_and_takes_each_batch_as_it_is_emitted(tmp_path):
    """A commit the node's watch finds while the job's batch is being emitted is cut at once (up to
    `batches_ahead` waiting), above the batch waiting: the spans emit it next, without waiting for the take.
    The ticker takes what every span emitted, the first batch alone if the second is still being emitted."""
    with _three_steady_jobs(tmp_path) as (alone, ticker, path):
        one = alone[0]
        seen = {"version": 1}
        one.coordinator.newest = lambda source, within: seen["version"]
        _append(path, 2)
        ticker.tick(time.time())
        [first] = one.intents()
        _append(path, 3)
        seen["version"] = 2
        ticker.tick(time.time())
        second = one.intents()[1]
        assert second.ranges == {"s.t": (1, 2)} and second.target > first.target
        assert one.coordinator.steady.waiting == (first, second)
        _append(path, 4)
        seen["version"] = 3
        ticker.tick(time.time())
        assert one.intents() == [first, second]  # batches_ahead (2) wait: the third commit waits its turn
        assert one.emit() == first.batch_seq
        one.coordinator.batch_emitted()
        ticker.tick(time.time())
        assert one.intents() == [second] and one.job().high_water >= first.target
        ticker.tick(time.time())
        assert one.intents()[1].ranges == {"s.t": (2, 3)}  # cut in the round after the take
        assert one.coordinator.steady.waiting == tuple(one.intents())


def test_a_steady_job_s_batch_emitted_by_another_node_s_spans_is_taken_by_the_ticker_not_by_a_step(tmp_path):
    """Where a job's spans are on two nodes, the coordinating node's watch finds the other node's record of its
    share and tells the coordinator, which stays steady: the ticker takes the batch with other jobs' (a step a
    batch of every such job was most of three nodes' work under commits). Until every span emitted it, nothing
    is taken."""
    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    feed = {"name": "f", "tables": ["s.t"], "sink": "out", "options": {"resolved": "0s", "initial_scan": "no"}}
    table = {"path": str(path), "primary_key": ["id"], "spans": 2}
    root = write_project(tmp_path / "p", {"t": table}, [feed], [file_sink("out")])
    with CoordinatorAlone(root, "f", poll_interval=0.2) as alone:
        alone.join("n2")
        coordinator = alone.coordinator
        watch = NodeWatch(alone.store, "n1", poll_interval=60, liveness_ttl=10, span_grace=5)
        watch.add(alone.job_id, {}, coordinator.wake, coordinator.cut, None, coordinator.batch_emitted)
        watch.look()  # the first look wakes everyone: the job's thread then steps
        ticker = Ticker(alone.store)
        coordinator.watched, coordinator.ticker = True, ticker
        for _ in range(5):  # stepped until steady, and nothing left that the watch wakes it for
            alone.step()
            alone.emit("n1"), alone.emit("n2")
            woken = coordinator.wake.count
            watch.look()
            if coordinator.steady is not None and coordinator.wake.count == woken:
                break
        with alone.store.reading() as conn:
            assert sorted(s.node for s in spans.of_job(conn, alone.job_id)) == ["n1", "n2"]
        assert coordinator.steady is not None
        _append(path, 2)
        coordinator.newest = lambda source, within: 1
        ticker.tick(time.time())
        [changes] = alone.intents()
        woken = coordinator.wake.count
        assert alone.emit("n1") == changes.batch_seq
        coordinator.batch_emitted()  # as this node's spans say once they recorded it
        ticker.tick(time.time())
        assert alone.intents() == [changes]  # n2's span has not emitted it
        assert alone.emit("n2") == changes.batch_seq
        watch.look()
        assert coordinator.wake.count == woken and coordinator.steady.emitted  # told, not woken
        ticker.tick(time.time())
        assert not alone.intents() and alone.job().high_water >= changes.target
        assert coordinator.steady is not None and coordinator.wake.count == woken


def test_the_ticker_commits_many_jobs_marks_at_once_and_hands_back_a_job_that_stopped(tmp_path):
    with _three_steady_jobs(tmp_path) as (alone, ticker, _):
        root = alone[0].root
        before, counted = [one.job().high_water for one in alone], alone[0].transactions  # the ticker's store
        counted.reset()
        _tick_when_due(ticker, *alone)
        assert counted.writes == 2  # the three jobs' marks, then their three resolved timestamps' records
        assert all(one.job().high_water > b for one, b in zip(alone, before))
        with alone[1].store.transaction() as conn:
            jobs.control(conn, alone[1].job(), "pause")  # as `feedctl pause b`
        woken, before = alone[1].coordinator.wake.count, [one.job().high_water for one in alone]
        counted.reset()
        _tick_when_due(ticker, *alone)
        assert counted.writes == 2
        assert alone[1].coordinator.wake.count > woken  # handed back: its own step finds the job paused
        assert alone[1].job().high_water == before[1]
        assert alone[0].job().high_water > before[0] and alone[2].job().high_water > before[2]
        with pytest.raises(jobs.NotRunning):  # as its thread's step finds it: that thread ends
            alone[1].step()
        # A sink that cannot take its resolved timestamp holds back no other feed: its job steps on its own
        # thread, whose retries pause it if the sink stays away.
        shutil.rmtree(root / "target" / "sink" / "c")
        (root / "target" / "sink" / "c").write_text("not a folder")
        woken, said = alone[2].coordinator.wake.count, len(alone[0].said("resolved"))
        _tick_when_due(ticker, alone[0], alone[2])
        assert alone[2].coordinator.wake.count > woken
        assert len(alone[0].said("resolved")) == said + 1


def test_the_ticker_s_workers_write_a_round_s_resolved_files_and_record_them_in_one_transaction(tmp_path):
    """A round's resolved files into local folders are written by the ticker's workers, a share each, and
    recorded together by the last share to finish: the marks in one write, the resolved timestamps in one
    more, whatever the number of shares. Each job's `resolving` is let go only once recorded: its own step
    records after."""
    with _three_steady_jobs(tmp_path) as (alone, ticker, _):
        before = [one.job().resolved for one in alone]
        said = [len(one.said("resolved")) for one in alone]
        counted = alone[0].transactions
        counted.reset()
        ticker._workers = ThreadPoolExecutor(3)  # the ticker's workers, without its thread: one round alone
        _tick_when_due(ticker, *alone)
        ticker._workers.shutdown(wait=True)
        assert counted.writes == 2  # the marks, then the three resolved timestamps: not one record a worker
        assert all(one.job().resolved > b for one, b in zip(alone, before))
        assert [len(one.said("resolved")) for one in alone] == [n + 1 for n in said]  # each file written once
        for one in alone:
            for lock in (one.coordinator.stepping, one.coordinator.resolving):
                assert lock.acquire(blocking=False)
                lock.release()


def test_a_commit_is_cut_and_its_batch_taken_while_the_job_s_resolved_timestamp_is_being_written(tmp_path):
    """The ticker's workers write a round's resolved files while its next rounds go on: a commit found then is
    cut, and its batch taken once emitted, without waiting for the file (under load a round's files took most of
    each second, and cuts waited behind them). The job is ticked again only once its file is written, and the
    ticker, which does not count it due meanwhile, is woken then; the mark
    the take moved stays where it is, and the next resolved timestamp is at it or past it."""
    root, path = _three_feeds_over_one_table(tmp_path)
    hold, writing = threading.Event(), threading.Event()

    def reached(point: str) -> None:  # a worker of the ticker writing the resolved timestamp waits for the test
        if point == "after-checkpoint" and threading.current_thread().name.startswith("resolved"):
            writing.set()
            assert hold.wait(30)

    with CoordinatorAlone(root, "a", poll_interval=0.2, knobs=TestingKnobs(reached=reached)) as one:
        ticker = Ticker(one.store)
        _steady(one, ticker)
        ticker._workers = ThreadPoolExecutor(1, thread_name_prefix="resolved")
        try:
            _tick_when_due(ticker, one)
            assert writing.wait(10)  # the worker holds the job's `resolving`
            seen = {"version": 0}
            one.coordinator.newest = lambda source, within: seen["version"]
            _append(path, 2)
            seen["version"] = 1
            ticker.tick(time.time())
            [changes] = one.intents()  # cut while the file is being written
            assert changes.ranges == {"s.t": (0, 1)}
            assert one.emit() == changes.batch_seq
            one.coordinator.batch_emitted()
            ticker.tick(time.time())
            assert not one.intents() and one.job().high_water >= changes.target  # taken
            assert not one.coordinator.resolving.acquire(blocking=False)  # not ticked again meanwhile
            steady, due = one.coordinator.steady, one.coordinator.steady.due_at
            steady.due_at = time.time() - 1  # its next tick due while the file is being written
            assert ticker._next_due() > time.time()  # left out: the ticker does not go round for it meanwhile
            ticker._held_more.clear()
        finally:
            hold.set()
            ticker._workers.shutdown(wait=True)
            ticker._workers = None
        assert ticker._held_more.is_set()  # the file written, the ticker woken to tick it
        steady.due_at = due
        assert one.coordinator.steady.marks.high_water >= changes.target  # the file's write moved it not back
        written = one.job().resolved
        assert written < changes.target
        _tick_when_due(ticker, one)
        assert one.job().resolved >= changes.target > written
        assert one.coordinator.steady.marks.resolved == one.job().resolved


def _two_tables(tmp_path, **options):
    tables = {}
    for name in ("a", "b"):
        path = write_delta(tmp_path / "data" / name, {"id": "int64", "v": "string"}, [{"id": 1, "v": name}])
        tables[name] = {"path": str(path), "primary_key": ["id"], "spans": 2}
    feed = {"name": "f", "tables": ["s.a"], "sink": "out", "options": {"resolved": "0s", **options}}
    root = write_project(tmp_path / "p", tables, [feed], [file_sink("out")])
    return root, feed, {n: t["path"] for n, t in tables.items()}


def _emit_all(alone: CoordinatorAlone, *nodes: str) -> None:
    """Every node emits every batch waiting for it, and the coordinator steps in between."""
    for _ in range(10):
        emitted = [alone.emit(n) for n in nodes or (alone.settings.node_id,)]
        alone.step()
        if not any(emitted):
            return


def test_a_table_added_in_place_is_scanned_alone_above_everything_cut_before(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        _append(paths["a"], 2)
        _emit_all(alone)
        cut_before = alone.job().high_water
        write_feeds(root, [{**feed, "tables": ["s.a", "s.b"]}])
        alone.take()
        alone.step()  # the only node has the copy: the job takes it
        job = alone.job()
        assert definition_of(job).tables == ("s.a", "s.b") and definition_of(job).revision == 2
        alone.step()
        [scan] = [i for i in alone.intents() if i.kind == IntentKind.SCAN]
        assert scan.ranges == {"s.b": (-1, 0)} and scan.target > cut_before
        _emit_all(alone)
        job = alone.job()
        assert job.high_water >= scan.target and definition_of(job).table_changes[0].scan_at == scan.target
        with alone.store.reading() as conn:
            assert {(s.table, s.node) for s in spans.of_job(conn, alone.job_id)} == {("s.a", "n1"), ("s.b", "n1")}


def test_a_table_dropped_in_place_is_emitted_up_to_its_last_batch_then_its_spans_go(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    write_feeds(root, [{**feed, "tables": ["s.a", "s.b"]}])
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        _emit_all(alone)
        _append(paths["b"], 2)
        alone.step()
        [waiting] = alone.intents()
        assert waiting.ranges == {"s.b": (0, 1)}
        write_feeds(root, [feed])
        alone.take()
        alone.step()
        assert definition_of(alone.job()).tables == ("s.a",)
        _append(paths["b"], 3)  # after the drop: never emitted
        _append(paths["a"], 3)
        _emit_all(alone)
        with alone.store.reading() as conn:
            cut = [batch_intents.intent(conn, alone.job_id, n) for n in range(1, 10)]
            assert {s.table for s in spans.of_job(conn, alone.job_id)} == {"s.a"}
        assert alone.job().high_water > waiting.target
        assert [i for i in cut if i is not None] == []  # every batch emitted
        assert [e["table"] for e in alone.said("table_dropped")] == ["s.b"]


def test_an_option_changed_in_place_applies_from_the_first_batch_not_yet_cut(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        _append(paths["a"], 2)
        alone.step()
        [before] = [i for i in alone.intents() if i.kind == IntentKind.CHANGES]
        write_feeds(root, [{**feed, "options": {**feed["options"], "diff": True}}])
        alone.take()
        alone.step()
        _append(paths["a"], 3)
        _emit_all(alone)
        definition = definition_of(alone.job())
        [change] = definition.option_changes
        assert change.from_batch == before.batch_seq + 1 and change.now == {"diff": True}
        assert definition.options_at(before.batch_seq).diff is False
        assert definition.options_at(change.from_batch).diff is True


def test_a_commit_that_cannot_be_read_fails_the_job_at_once_naming_the_table(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    with CoordinatorAlone(root, "f", retries=3) as alone:
        alone.step()
        _emit_all(alone)
        _append(paths["a"], 2)
        (Path(paths["a"]) / "_delta_log" / f"{2:020}.json").write_text("{not json")
        assert alone.step() is True
        job = alone.job()
        assert job.status == "failed" and "s.a" in job.error, job.error
        assert alone.said("retry") == []  # what no retry fixes is not retried


def test_a_node_joining_takes_its_share_of_the_spans_and_the_mark_waits_for_both(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    write_feeds(root, [{**feed, "tables": ["s.a", "s.b"]}])
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        _emit_all(alone)
        alone.join("n2")
        _append(paths["a"], 2)
        _append(paths["b"], 2)
        alone.step()  # two spans are handed over at n1's next batch boundary
        [batch] = alone.intents()
        assert alone.emit("n1") == batch.batch_seq
        with alone.store.reading() as conn:
            owners = sorted(s.node for s in spans.of_job(conn, alone.job_id))
        assert owners == ["n1", "n1", "n2", "n2"]
        alone.step()
        assert alone.job().high_water < batch.target  # n2's spans have not emitted it
        assert alone.emit("n2") == batch.batch_seq
        alone.step()
        assert alone.job().high_water >= batch.target


def test_a_node_behind_catches_up_in_one_emit_but_not_across_an_option_change(tmp_path):
    """The node's side: the batch it emits next, read from the job at once, with the options of that batch."""
    root, feed, paths = _two_tables(tmp_path)
    with CoordinatorAlone(root, "f", batches_ahead=4) as alone:
        alone.step()
        _emit_all(alone)
        for i in (2, 3):
            _append(paths["a"], i)
            alone.step()
        write_feeds(root, [{**feed, "options": {**feed["options"], "diff": True}}])
        alone.take()
        alone.step()
        _append(paths["a"], 4)
        alone.step()
        cut = [i.batch_seq for i in alone.intents()]
        assert len(cut) == 3

        with alone.store.transaction() as conn:  # one span ran ahead (on another node, since gone)
            ran_ahead = spans.Emitted(alone.job_id, "n1", [("s.a", 0)], cut[2], alone.intents()[2].target, cut[0] - 1)
            spans.emitted(conn, [ran_ahead])

        def next_emit() -> Batch:
            with alone.store.transaction() as conn:
                spans.boundary(conn, "n1", alone.job_id)
                counts = {t: n for t, (_, n) in checkpoints.positions(conn, alone.job_id).items()}
                [pending] = share.pending(conn, [alone.job_id])
                batch = next_batch(pending, "n1", alone.coordinator.sources, counts, alone.coordinator.declared, False)
                spans.emitted(
                    conn,
                    [
                        spans.Emitted(
                            alone.job_id,
                            "n1",
                            batch.spans,
                            batch.last.batch_seq,
                            batch.last.target,
                            batch.first.batch_seq - 1,
                        )
                    ],
                )
            return batch

        behind = next_emit()  # the spans behind catch up on two batches in one emit, up to the option change
        assert [i.batch_seq for i in behind.intents] == cut[:2] and behind.options.diff is False
        assert behind.spans == [("s.a", 1)] and len(behind.recorded) == 2
        assert behind.following is not None and behind.following.batch_seq == cut[2]
        assert behind.layouts["s.a"].key == ["id"]
        after = next_emit()
        assert [i.batch_seq for i in after.intents] == cut[2:] and after.options.diff is True


def test_a_drained_nodes_spans_are_placed_at_once_on_the_node_left_and_the_mark_waits_for_them(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    write_feeds(root, [{**feed, "tables": ["s.a", "s.b"]}])
    with CoordinatorAlone(root, "f") as alone:
        alone.join("n2")
        alone.step()
        _emit_all(alone, "n1", "n2")
        with alone.store.reading() as conn:
            held = {s.key for s in spans.of_job(conn, alone.job_id) if s.node == "n2"}
        assert held, "n2 holds spans before it drains"
        alone.drain("n2")
        _append(paths["a"], 2)
        alone.step()  # places the released spans, cuts the commit
        with alone.store.reading() as conn:
            after = {s.key: s for s in spans.of_job(conn, alone.job_id)}
        assert {k: after[k].node for k in held} == {k: "n1" for k in held}
        assert {after[k].note for k in held} == {"released by n2"}
        [batch] = alone.intents()
        assert alone.emit("n1") == batch.batch_seq
        alone.step()
        assert alone.job().high_water >= batch.target


def test_a_schema_change_under_policy_stop_ends_the_job_once_everything_up_to_it_is_emitted(tmp_path):
    root, feed, paths = _two_tables(tmp_path, schema_change_policy="stop", schema_change_events="column_changes")
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        _emit_all(alone)
        _append(paths["a"], 2)
        wide = pa.table({"id": pa.array([3], pa.int64()), "v": ["v3"], "w": pa.array([1], pa.int32())})
        write_deltalake(str(paths["a"]), wide, mode="append", schema_mode="merge")  # version 2 adds `w`
        later = pa.table({"id": pa.array([4], pa.int64()), "v": ["v4"], "w": pa.array([2], pa.int32())})
        write_deltalake(str(paths["a"]), later, mode="append")  # after the change: never emitted by this job
        alone.step()
        cut = alone.intents()
        # the version before the change, then the change's own version, whose row changes are emitted too
        assert [i.ranges["s.a"] for i in cut] == [(0, 1), (1, 2)]
        assert [i.schema_changes for i in cut] == [{}, {"s.a": "stop"}]
        ended = False
        for _ in cut:
            assert not ended, "the job ended before every batch cut was emitted"
            alone.emit()
            ended = alone.step()
        assert ended
        job = alone.job()
        assert job.status == "failed", "a stop at a schema change fails the job whatever on_error says"
        assert "schema change occurred at" in job.error and "w" in job.error, job.error
        assert "feedctl run --new-job -s f --cursor" in job.error
        assert job.high_water >= cut[-1].target and alone.intents() == []


def test_a_key_changed_in_project_yml_is_taken_from_the_next_version_in_spans_laid_out_for_it(tmp_path):
    root, feed, paths = _two_tables(tmp_path)
    with CoordinatorAlone(root, "f") as alone:
        alone.step()
        _append(paths["a"], 2)
        _emit_all(alone)
        project = yaml.safe_load((root / "project.yml").read_text())
        project["sources"][0]["tables"][0]["primary_key"] = ["v", "id"]
        (root / "project.yml").write_text(yaml.safe_dump(project, sort_keys=False))
        alone.take()
        alone.step()
        assert definition_of(alone.job()).key_changes == ()  # the table has no version past the job's yet
        _append(paths["a"], 3)
        alone.step()
        [change] = definition_of(alone.job()).key_changes
        assert (change.table, change.version) == ("s.a", 2)
        assert (change.before.primary_key, change.after.primary_key) == (("id",), ("v", "id"))
        assert definition_of(alone.job()).keys["s.a"].primary_key == ("v", "id")
        [rekeyed] = alone.said("key_changed")
        assert rekeyed["version"] == 2
        [under_new_key] = alone.intents()
        assert under_new_key.ranges == {"s.a": (1, 2)}
        with alone.store.reading() as conn:  # the old spans emitted every batch before it, and went
            laid_out = spans.of_job(conn, alone.job_id)
        assert len(laid_out) == 2 and {s.batch_seq for s in laid_out} == {under_new_key.batch_seq - 1}
        _emit_all(alone)
        assert alone.job().high_water >= under_new_key.target and alone.intents() == []


def test_a_table_dropped_before_the_initial_scan_is_cut_is_never_scanned_and_verify_expects_nothing_of_it(tmp_path):
    """A job continued from one whose scan was under way scans again; a drop that reaches it before its first
    step leaves the table out of the scan, and verify must not wait for a scan that was never cut."""
    from feedctl.verify.feed import _histories

    root, feed, paths = _two_tables(tmp_path)
    write_feeds(root, [{**feed, "tables": ["s.a", "s.b"]}])
    with CoordinatorAlone(root, "f") as alone:
        write_feeds(root, [feed])
        alone.take()
        alone.step()  # takes the drop, then cuts the initial scan of what is left
        [scan] = alone.intents()
        assert scan.kind == IntentKind.SCAN and set(scan.ranges) == {"s.a"}
        _emit_all(alone)
        job = alone.job()
        assert definition_of(job).tables_ever() == ["s.a", "s.b"] and job.high_water >= scan.target
        histories = {h.name: h for h in _histories(alone.store, alone.project, job)}
        assert histories["s.a"].scanned_at == job.start
        assert histories["s.b"].scanned_at is None and histories["s.b"].event_ts == {}


def test_a_job_whose_history_a_vacuum_may_take_soon_is_warned_of_once(tmp_path):
    """The coordinator looks at its job's headroom under each table's retention: below a quarter of it, an
    event says so, once, and the node's metric has it."""
    from deltalake import DeltaTable

    path = write_delta(tmp_path / "data" / "t", {"id": "int64", "v": "string"}, [{"id": 1, "v": "a"}])
    DeltaTable(str(path)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 seconds"})
    feed = {"name": "f", "tables": ["s.t"], "sink": "out", "options": {"initial_scan": "no"}}
    root = write_project(tmp_path / "p", {"t": {"path": str(path), "primary_key": ["id"]}}, [feed], [file_sink("out")])
    with CoordinatorAlone(root, "f") as alone:
        alone.coordinator.history._looked = None  # a look is due (one every five minutes, the first at random)
        alone.step()
        assert alone.coordinator.history.least() == 0.0  # version 2 is not committed yet: the whole retention
        assert not [e for e in alone.events if e.get("event") == "history_headroom_low"]
        _append(path, 2)  # version 2: the job needs it, and a retention of 0 s has passed it already
        alone.coordinator.history._looked = None  # the next look is due
        alone.step()
        [warned] = [e for e in alone.events if e.get("event") == "history_headroom_low"]
        assert warned["table"] == "s.t" and warned["needed_version"] == 2 and warned["headroom_seconds"] <= 0
        assert "feedctl retention s.t" in warned["message"]
        alone.coordinator.history._looked = None
        alone.step()
        assert len([e for e in alone.events if e.get("event") == "history_headroom_low"]) == 1


def test_a_node_that_begins_to_drain_while_it_claims_a_job_steps_it_not_and_gives_the_lease_back(tmp_path):
    """Two nodes drained at once: the one left last may claim the job the other released, in the instant its
    own drain begins. It must not step the job (a step would place the job's spans on it) and must release the
    lease at once, for a node that stays."""
    import threading

    from feedctl.coordinator import following

    root = _resolving_feed(tmp_path)
    with CoordinatorAlone(root, "f", poll_interval=0.2, lease_ttl=3) as alone:
        coordinator = alone.coordinator
        coordinator.release()
        stop, done = threading.Event(), threading.Event()
        claim, stepped = coordinator.claim, []

        def claim_as_the_drain_begins(**kwargs):
            epoch = claim(**kwargs)
            stop.set()
            return epoch

        coordinator.claim = claim_as_the_drain_begins
        coordinator.step = lambda: stepped.append(True)
        assert following.Turns(coordinator, stop, done).turn() is None  # the turns end
        assert stepped == [] and not alone.said("coordinating")
        assert alone.job().coordinator is None  # the lease given back
