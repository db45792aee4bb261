"""A --follow node's watch (`node/watch.py`) over a real state store: whom a change of a job wakes on which
node. What a node does alone wakes no one there (its coordinator cuts and takes batches, its spans record
what they emitted, and each wakes the other itself); what another node does wakes those it concerns."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import update

from feedctl.coordinator import fenced
from feedctl.coordinator.lease import holder_id
from feedctl.node import watch_marks
from feedctl.node.watch import NodeWatch
from feedctl.state import checkpoints, jobs, many_rows, nodes, schema, spans
from feedctl.state.batch_intents import IntentKind
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from support.jobs import definition

S = 1_000_000_000
TABLE = "shop.orders"


class Node:
    """A node's watch of one job, with the two events it wakes and what it tells the coordinator of the batches
    other nodes' spans emitted."""

    def __init__(self, store: StateStore, node_id: str, job_id: int):
        self.watch = NodeWatch(store, node_id, poll_interval=60, liveness_ttl=10, span_grace=5)
        self.coordinator, self.spans, self.emitted = threading.Event(), threading.Event(), threading.Event()
        self.watch.add(job_id, {}, self.coordinator, self.spans, None, self.emitted.set)

    def woken(self) -> set[str]:
        """Whom one look wakes, or tells."""
        events = {"coordinator": self.coordinator, "spans": self.spans, "emitted": self.emitted}
        for event in events.values():
            event.clear()
        self.watch.look()
        return {name for name, event in events.items() if event.is_set()}


def _job_coordinated_by_n1_with_a_span_on_each_node(store: StateStore) -> tuple[int, int]:
    with store.transaction() as conn:
        job = jobs.create_job(conn, "orders", "sha256:x", definition(TABLE), "file://x", Hlc(10 * S), {TABLE: (0, 2)})
        epoch = jobs.claim_lease(conn, job.job_id, holder_id("n1"), ttl=60)
        spans.ensure(conn, job.job_id, {TABLE: 2}, 0, job.high_water)
        first, second = spans.of_job(conn, job.job_id)
        spans.assign(conn, job.job_id, first, "n1", "test")
        spans.assign(conn, job.job_id, second, "n2", "test")
    return job.job_id, epoch


def _cut(store: StateStore, job_id: int, epoch: int, seq: int) -> None:
    with store.transaction() as conn:
        fenced.cut(conn, job_id, epoch, IntentKind.CHANGES, Hlc((10 + seq) * S), {TABLE: (seq - 1, seq)})


def _emitted(store: StateStore, job_id: int, node: str, span: int, seq: int) -> None:
    with store.transaction() as conn:
        assert spans.emitted(conn, [spans.Emitted(job_id, node, [(TABLE, span)], seq, Hlc((10 + seq) * S), seq - 1)])[0]


def test_what_a_node_does_alone_wakes_no_one_there_and_what_another_does_wakes_those_it_concerns(store):
    job_id, epoch = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    here, there = Node(store, "n1", job_id), Node(store, "n2", job_id)
    assert here.woken() == there.woken() == {"coordinator", "spans"}  # the first look
    assert here.woken() == there.woken() == set()

    _cut(store, job_id, epoch, 1)  # n1's coordinator cut a batch: it woke n1's spans itself
    assert here.woken() == set()
    assert there.woken() == {"spans"}  # n2's spans learn of it from the store

    _emitted(store, job_id, "n1", 0, 1)  # n1's span emitted it: it woke n1's coordinator itself
    assert here.woken() == set()
    assert there.woken() == set()

    _emitted(store, job_id, "n2", 1, 1)  # n2's span emitted it: n1's coordinator is told of it from the store
    assert here.woken() == {"emitted"}
    assert there.woken() == set()

    with store.transaction() as conn:  # paused: everyone stops
        jobs.finish(conn, job_id, JobStatus.PAUSED)
    assert here.woken() == there.woken() == {"coordinator", "spans"}


def test_a_look_takes_apart_only_what_changed_since_the_last_and_nothing_while_the_jobs_are_idle(store, monkeypatch):
    """Each part a node's watch reads (jobs, spans, pending batches, views) comes folded into one text by the
    store, and is taken apart only when that text changed: at an idle node the ticker's marks and the leases'
    renewals change rows every second, and none of what the watch reacts to."""
    job_id, epoch = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    taken_apart = []
    rows = many_rows.Folded.rows
    monkeypatch.setattr(many_rows.Folded, "rows", lambda folded: taken_apart.append(folded.names) or rows(folded))
    looks = watch_marks.WatchMarks("n1", holder_id("n1"))

    def look() -> dict:
        taken_apart.clear()
        with store.reading() as conn:
            return looks.marks(conn, [job_id])

    first = look()
    assert len(taken_apart) == 4
    with store.transaction() as conn:  # what an idle node writes: its lease renewed, its mark moved
        jobs.renew_lease(conn, job_id, holder_id("n1"), epoch, ttl=60)
        jobs.fence(conn, [(job_id, epoch)], **checkpoints.mark_values(Hlc(11 * S)))
    assert look() == first and taken_apart == []
    _cut(store, job_id, epoch, 1)
    assert look()[job_id].spans == first[job_id].spans  # this node coordinates: its spans learn of it directly
    assert len(taken_apart) == 1 and "batch_seq" not in taken_apart[0]  # the pending batches alone
    _emitted(store, job_id, "n2", 1, 1)
    now = look()[job_id]
    assert len(taken_apart) == 1 and "batch_seq" in taken_apart[0]  # the spans alone
    assert (now.coordinator, now.spans) == (first[job_id].coordinator, first[job_id].spans)
    assert now.emitted != first[job_id].emitted


def test_a_change_taken_apart_by_a_look_that_then_failed_is_in_the_marks_of_the_next(store, monkeypatch):
    """A look whose read of a later part fails (the store away) leaves what it took apart to the next look,
    whose folds of that part are then unchanged: the change still reaches the marks."""
    job_id, _ = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    looks = watch_marks.WatchMarks("n2", holder_id("n2"))
    with store.reading() as conn:
        first = looks.marks(conn, [job_id])
    with store.transaction() as conn:
        jobs.finish(conn, job_id, JobStatus.PAUSED)
    folding = watch_marks.fold

    def views_away(conn, statement, parameters=None):
        if "view" in statement.selected_columns:
            raise ConnectionError("the store went away")
        return folding(conn, statement, parameters)

    monkeypatch.setattr(watch_marks, "fold", views_away)
    with store.reading() as conn, pytest.raises(ConnectionError):
        looks.marks(conn, [job_id])
    monkeypatch.setattr(watch_marks, "fold", folding)
    with store.reading() as conn:
        now = looks.marks(conn, [job_id])
    assert now[job_id].coordinator != first[job_id].coordinator and now[job_id].spans != first[job_id].spans


def test_a_lease_past_its_time_wakes_the_other_nodes_and_once_taken_the_node_that_held_it(store):
    """A lease past its time is another node's to take: that node's coordinator is woken. The node holding it
    is not (its renewal, late under load, would wake every job it coordinates): the lease stays its own, and
    it knows every batch cut, until another node takes it. Then both its coordinator and its spans are woken,
    and its spans learn of the batches the new coordinator cuts from the store."""
    job_id, epoch = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    here, there = Node(store, "n1", job_id), Node(store, "n2", job_id)
    here.woken(), there.woken()
    with store.transaction() as conn:
        conn.execute(update(schema.jobs).where(schema.jobs.c.job_id == job_id).values(lease_expires_at=0))
    assert here.woken() == set()
    assert there.woken() == {"coordinator", "spans"}  # n2 may take the lease
    _cut(store, job_id, epoch, 1)  # n1 still coordinates: it woke its spans itself
    assert here.woken() == set()
    with store.transaction() as conn:
        taken = jobs.claim_lease(conn, job_id, holder_id("n2"), ttl=60)  # expired: free to take
    assert taken == epoch + 1
    assert here.woken() == {"coordinator", "spans"}
    _cut(store, job_id, taken, 2)  # n2's coordinator cut a batch
    assert here.woken() == {"spans"}


def test_the_coordinators_of_a_table_take_its_newest_version_from_the_last_look_of_the_watch(tmp_path):
    """One look at a table's log per poll for all the feeds reading it: their coordinators take the version
    that look found, unless it is older than they accept; then they read the log themselves."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from feedctl.source.delta import DeltaSource

    def commit(i: int) -> None:
        write_deltalake(str(tmp_path / "t"), pa.table({"id": pa.array([i], pa.int64())}), mode="append")

    commit(0)
    store = StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)
    job_id, _ = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    source, elsewhere = DeltaSource(TABLE, str(tmp_path / "t")), DeltaSource(TABLE, str(tmp_path / "u"))
    watch = NodeWatch(store, "n1", poll_interval=60, liveness_ttl=10, span_grace=5)
    coordinator, moved = threading.Event(), []
    watch.add(job_id, {TABLE: source}, coordinator, threading.Event(), lambda: moved.append(job_id))
    assert watch.newest(source, 60) is None  # not looked at yet
    watch.look()
    assert watch.newest(source, 60) == 0
    coordinator.clear()
    moved.clear()
    commit(1)
    assert watch.newest(source, 60) == 0  # as the last look found it
    watch.look()
    assert watch.newest(source, 60) == 1
    # told, not woken: a steady job's new version is cut by the node's ticker (`SteadyJob.table_moved`)
    assert moved == [job_id] and not coordinator.is_set()
    assert watch.newest(source, 0) is None  # a look older than asked for
    assert watch.newest(elsewhere, 60) is None  # a table it does not watch


def test_a_node_whose_own_heartbeat_is_late_wakes_none_of_its_jobs_and_the_other_nodes_wake_all_of_theirs(tmp_path):
    """Under load a node's heartbeat may be late: the store counts it dead a moment. It wakes none of its own
    jobs for that (hundreds of full steps at once would load it more, and its heartbeat would be later still);
    the other nodes, for whom it is gone, wake every job of theirs, which moves its spans."""
    store = StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)
    job_id, _ = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    with store.transaction() as conn:
        for node in ("n1", "n2"):
            nodes.register(conn, node, "", host="h", pid=1)
    here, there = Node(store, "n1", job_id), Node(store, "n2", job_id)
    here.woken(), there.woken()
    with store.transaction() as conn:
        conn.execute(update(schema.nodes).where(schema.nodes.c.node_id == "n1").values(heartbeat_at=0))
    assert here.woken() == set()
    assert there.woken() == {"coordinator", "spans"}


def test_a_commit_is_seen_within_the_poll_interval_while_the_look_at_the_store_is_slow(tmp_path):
    """Under a node's load a look at the store takes seconds: the watch's look at the tables' logs does not
    wait for it. Here the store look is held for as long as the test wants (a store whose snapshots, for the
    node's watch, wait on an event), and a commit is still told to the job reading the table."""
    from contextlib import contextmanager

    import pyarrow as pa
    from deltalake import write_deltalake

    from feedctl.source.delta import DeltaSource

    def commit(i: int) -> None:
        write_deltalake(str(tmp_path / "t"), pa.table({"id": pa.array([i], pa.int64())}), mode="append")

    commit(0)
    store = StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)
    job_id, _ = _job_coordinated_by_n1_with_a_span_on_each_node(store)
    held, looking, reading = threading.Event(), threading.Event(), store.reading

    @contextmanager
    def slow_reading(node: bool = False):
        if node:
            looking.set()
            held.wait(30)
        with reading(node) as conn:
            yield conn

    store.reading = slow_reading
    source = DeltaSource(TABLE, str(tmp_path / "t"))
    moved = threading.Event()
    watch = NodeWatch(store, "n1", poll_interval=0.05, liveness_ttl=10, span_grace=5)
    watch.add(job_id, {TABLE: source}, threading.Event(), threading.Event(), moved.set)
    with watch:
        try:
            assert looking.wait(10), "the watch looks at the store"
            assert moved.wait(10)  # the first look at the table
            moved.clear()
            commit(1)
            assert moved.wait(10), "the commit is told while the look at the store is held"
            assert watch.newest(source, 60) == 1
        finally:
            held.set()


def test_a_view_a_node_publishes_of_a_feed_wakes_that_feeds_jobs_only(store):
    """Each runner publishes its view of its feed as it starts (`job/rollout.py`): the rollouts of that feed's
    job react to it, and no other job does. As 500 feeds start, a view in every node's common mark would wake
    every job at nearly every look."""
    with store.transaction() as conn:
        orders = jobs.create_job(conn, "orders", "sha256:x", definition(TABLE), "file://x", Hlc(S), {TABLE: (0, 1)})
        users = jobs.create_job(conn, "users", "sha256:y", definition(TABLE), "file://y", Hlc(S), {TABLE: (0, 1)})
    watch = NodeWatch(store, "n1", poll_interval=60, liveness_ttl=10, span_grace=5)
    events = {job.feed: (threading.Event(), threading.Event()) for job in (orders, users)}
    for job in (orders, users):
        watch.add(job.job_id, {}, *events[job.feed])

    def woken() -> dict[str, set[str]]:
        for pair in events.values():
            for event in pair:
                event.clear()
        watch.look()
        return {
            feed: {name for name, event in zip(("coordinator", "spans"), pair) if event.is_set()}
            for feed, pair in events.items()
        }

    woken()  # the first look wakes everyone
    assert woken() == {"orders": set(), "users": set()}
    with store.transaction() as conn:
        nodes.publish_view(conn, "n2", "orders", "sha256:x", loaded=7)
    assert woken() == {"orders": {"coordinator", "spans"}, "users": set()}
    with store.transaction() as conn:
        nodes.publish_view(conn, "n2", "orders", "sha256:x", loaded=9)  # the same view loaded again: unchanged
    assert woken() == {"orders": set(), "users": set()}
    with store.transaction() as conn:
        nodes.publish_view(conn, "n1", "users", "sha256:z", loaded=9)
    assert woken() == {"orders": set(), "users": {"coordinator", "spans"}}
