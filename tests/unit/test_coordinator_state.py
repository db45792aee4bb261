"""The coordinator's pure parts and its state transitions, without Spark: batch cuts, event timestamps,
leases, job transitions and the Delta commit log."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from sqlalchemy import insert, select, text, update
from sqlalchemy.exc import IntegrityError

from feedctl.coordinator import batch_plan, event_ts, fenced, lease
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.state import checkpoints, event_times, jobs, nodes, schema
from feedctl.state.group_commit import GroupCommit
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from support.jobs import definition

S = 1_000_000_000


def _store(tmp_path) -> StateStore:
    return StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)


def _job(store, start=Hlc(10 * S), version: int = 1) -> jobs.Job:
    with store.transaction() as conn:
        return jobs.create_job(
            conn, "orders", "sha256:x", definition("shop.orders"), "file://x", start, {"shop.orders": (0, 2)}, version
        )


# -- batch cutting ---------------------------------------------------------------------------------------


def test_end_time_is_reached_although_later_versions_are_recorded():
    pending = [event_times.Recorded("a", 1, 0, Hlc(50 * S), 1), event_times.Recorded("a", 2, 0, Hlc(150 * S), 1)]
    plan = batch_plan.cut({"a": 0}, pending, Hlc(0), Hlc(200 * S), 100, end_time=Hlc(100 * S))
    assert plan.target == Hlc(100 * S) and plan.ranges == {"a": (0, 1)}
    assert batch_plan.cut({"a": 1}, pending[1:], plan.target, Hlc(200 * S), 100, Hlc(100 * S)) is None


def test_a_cut_never_splits_one_timestamp_and_respects_both_limits():
    pending = [event_times.Recorded("a", v, 0, Hlc(v * S), 10, 100) for v in range(1, 6)]
    pending.append(event_times.Recorded("b", 1, 0, Hlc(2 * S), 10, 100))
    # 25 rows fit a1 and a2; b1 shares a2's timestamp, so it comes along although it passes the limit
    by_rows = batch_plan.cut({"a": 0, "b": 0}, pending, Hlc(0), Hlc(0), max_rows=25)
    assert by_rows.target == Hlc(2 * S) and by_rows.ranges == {"a": (0, 2), "b": (0, 1)}
    by_bytes = batch_plan.cut({"a": 0, "b": 0}, pending, Hlc(0), Hlc(0), max_rows=10**9, max_bytes=450)
    assert by_bytes.target == Hlc(3 * S) and by_bytes.ranges == {"a": (0, 3), "b": (0, 1)}
    assert batch_plan.cut({"a": 0, "b": 0}, [], Hlc(5 * S), Hlc(4 * S), 10) is None
    assert batch_plan.cut({"a": 0, "b": 0}, [], Hlc(5 * S), Hlc(9 * S), 10).target == Hlc(9 * S)


def test_a_schema_change_is_its_tables_only_version_in_a_batch():
    pending = [event_times.Recorded("a", v, 0, Hlc(v * S), 10) for v in range(1, 6)]
    pending += [event_times.Recorded("b", 1, 0, Hlc(3 * S), 10), event_times.Recorded("b", 2, 0, Hlc(4 * S), 10)]
    changes = {("a", 3): "none", ("b", 2): "backfill"}  # a's version 3 and b's version 2 change their schemas

    def cut(positions, rest, high_water):
        return batch_plan.cut(positions, rest, high_water, Hlc(9 * S), 100, schema_changes=changes)

    first = cut({"a": 0, "b": 0}, pending, Hlc(0))
    # a3 would share a batch with a1 and a2; b1 is at a3's timestamp, so it waits too
    assert first.target == Hlc(2 * S) and first.ranges == {"a": (0, 2)} and first.rows == 20
    assert first.schema_changes == {}
    rest = [p for p in pending if p.table != "a" or p.version > 2]
    second = cut({"a": 2, "b": 0}, rest, first.target)
    # a3 opens a batch and ends it: other tables' versions at its timestamp come along
    assert second.target == Hlc(3 * S) and second.ranges == {"a": (2, 3), "b": (0, 1)}
    assert second.schema_changes == {"a": "none"}
    rest = [p for p in rest if (p.table, p.version) not in {("a", 3), ("b", 1)}]
    third = cut({"a": 3, "b": 1}, rest, second.target)
    assert third.target == Hlc(4 * S) and third.ranges == {"a": (3, 4), "b": (1, 2)}
    assert third.schema_changes == {"b": "backfill"}
    fourth = cut({"a": 4, "b": 2}, [p for p in rest if p.event_ts > Hlc(4 * S)], third.target)
    assert fourth.target == Hlc(9 * S) and fourth.ranges == {"a": (4, 5)} and fourth.schema_changes == {}


def test_nothing_after_a_change_the_job_stops_at_is_cut():
    """`schema_change_policy: stop`: the change's version ends its batch, and nothing after it is cut with
    it, nor does time move past it (the coordinator cuts no batch while that one waits)."""
    pending = [event_times.Recorded("a", v, 0, Hlc(v * S), 10) for v in range(1, 6)]
    pending.append(event_times.Recorded("b", 1, 0, Hlc(4 * S), 10))
    stop = {("a", 3): "stop"}
    first = batch_plan.cut({"a": 0, "b": 0}, pending, Hlc(0), Hlc(9 * S), 100, schema_changes=stop)
    assert first.target == Hlc(2 * S) and first.ranges == {"a": (0, 2)}
    second = batch_plan.cut({"a": 2, "b": 0}, pending[2:], first.target, Hlc(9 * S), 100, schema_changes=stop)
    assert second.target == Hlc(3 * S) and second.ranges == {"a": (2, 3)} and second.schema_changes == {"a": "stop"}
    alone = batch_plan.cut({"a": 2, "b": 0}, pending[2:3], first.target, Hlc(9 * S), 100, schema_changes=stop)
    assert alone.target == Hlc(3 * S), "time does not move past the change to the closed timestamp"


def test_a_key_change_waits_until_the_batches_before_it_are_emitted():
    """A key change (`wait` while batches are pending) is never cut, nor time moved to it; then it is cut
    alone for its table, like any schema change."""
    pending = [event_times.Recorded("a", v, 0, Hlc(v * S), 10) for v in range(1, 5)]
    waiting = batch_plan.cut({"a": 0}, pending, Hlc(0), Hlc(9 * S), 100, schema_changes={("a", 3): "wait"})
    assert waiting.target == Hlc(2 * S) and waiting.ranges == {"a": (0, 2)}
    assert (
        batch_plan.cut({"a": 2}, pending[2:], waiting.target, Hlc(9 * S), 100, schema_changes={("a", 3): "wait"})
        is None
    )
    due = batch_plan.cut({"a": 2}, pending[2:], waiting.target, Hlc(9 * S), 100, schema_changes={("a", 3): "backfill"})
    assert due.target == Hlc(3 * S) and due.ranges == {"a": (2, 3)} and due.schema_changes == {"a": "backfill"}


def test_schema_changes_are_found_between_versions(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.schema import Field

    from feedctl.source.delta import DeltaSource

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64())}))  # 0
    for v in range(1, 4):
        write_deltalake(path, pa.table({"id": pa.array([v], pa.int64())}), mode="append")  # 1..3
    DeltaTable(path).alter.add_columns([Field("tier", "string", nullable=True)])  # 4
    write_deltalake(path, pa.table({"id": pa.array([5], pa.int64()), "tier": ["gold"]}), mode="append")  # 5
    DeltaTable(path).alter.add_columns([Field("x", "long", nullable=True)])  # 6
    source = DeltaSource("s.t", path)
    assert source.schema_changes(0, 6) == [4, 6]
    assert source.schema_changes(4, 5) == [] and source.schema_changes(-1, 3) == []
    assert source.schema_changes(3, 4) == [4] and source.schema_changes(5, 6) == [6]


def test_commits_read_that_change_no_metadata_change_no_schema_and_cost_no_schema_read(tmp_path, monkeypatch):
    """A coordinator's step reads the new versions' commits, then asks which change the schema: where none
    changes the table's metadata (the schema is the metadata's), none does, and no schema is read for it."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.schema import Field

    from feedctl.source.delta import DeltaSource

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64())}))  # 0
    for v in range(1, 4):
        write_deltalake(path, pa.table({"id": pa.array([v], pa.int64())}), mode="append")  # 1..3
    DeltaTable(path).alter.set_table_properties({"delta.logRetentionDuration": "interval 40 days"})  # 4
    DeltaTable(path).alter.add_columns([Field("tier", "string", nullable=True)])  # 5
    source = DeltaSource("s.t", path)
    assert source.schema(0).names == ["id"]
    assert [c.metadata for c in source.commits(0, 5)] == [False, False, False, True, True]

    def read(*_):
        raise AssertionError("a schema read")

    with monkeypatch.context() as m:
        m.setattr(source, "table", read)
        m.setattr(DeltaTable, "load_as_version", read)
        assert source.schema_changes(0, 3) == [] and source.schema(3).names == ["id"]
    assert source.schema_changes(3, 5) == [5]  # a commit changing the metadata: its schema is read
    assert source.schema_changes(0, 4) == []  # the properties changed, not the schema


def test_a_newer_version_after_commits_that_change_no_metadata_takes_the_schema_known_without_loading_it(
    tmp_path, monkeypatch
):
    """A node's handle of a table asks for the schema of each batch's newest version: read from the commits
    since the newest version whose schema it knows, not from the version's snapshot, unless one changed the
    table's metadata."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.schema import Field

    from feedctl.source.delta import DeltaSource

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64())}))  # 0
    source = DeltaSource("s.t", path)
    assert source.schema(0).names == ["id"]
    for v in range(1, 3):
        write_deltalake(path, pa.table({"id": pa.array([v], pa.int64())}), mode="append")  # 1, 2

    def read(*_):
        raise AssertionError("a version loaded")

    with monkeypatch.context() as m:
        m.setattr(source, "table", read)
        m.setattr(DeltaTable, "load_as_version", read)
        assert source.schema(2).names == ["id"]
    DeltaTable(path).alter.add_columns([Field("tier", "string", nullable=True)])  # 3
    assert source.schema(3).names == ["id", "tier"] and source.schema_changes(2, 3) == [3]


def test_a_source_open_at_an_older_version_gives_each_newer_version_its_own_schema(tmp_path):
    """A coordinator told the newest version by its node's watch asks its source, open at an older one, for
    the newer versions' schemas: each read forward from the version open, never that version's."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.schema import Field

    from feedctl.source.delta import DeltaSource

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64())}))  # 0
    source = DeltaSource("s.t", path)
    assert source.latest_version() == 0
    DeltaTable(path).alter.add_columns([Field("tier", "string", nullable=True)])  # 1
    write_deltalake(path, pa.table({"id": pa.array([2], pa.int64()), "tier": ["gold"]}), mode="append")  # 2
    DeltaTable(path).alter.add_columns([Field("x", "long", nullable=True)])  # 3
    assert source.schema(2).names == ["id", "tier"] and source.schema(3).names == ["id", "tier", "x"]
    assert source.schema(0).names == ["id"] and source.schema_changes(0, 3) == [1, 3]


def test_event_timestamps_rise_above_the_floor_and_each_other():
    stamps = event_ts.assign([5 * S, 5 * S, 3 * S, 20 * S], None, floor=Hlc(4 * S))
    assert stamps == [Hlc(5 * S), Hlc(5 * S + 1), Hlc(5 * S + 2), Hlc(20 * S)]
    assert event_ts.assign([1], Hlc(7), floor=Hlc(100)) == [Hlc(101)]


# -- state ----------------------------------------------------------------------------------------------


def test_a_recorded_timestamp_is_never_replaced(tmp_path):
    store = _store(tmp_path)
    job = _job(store)
    first = [event_times.Recorded("shop.orders", v, v * S, Hlc(v * S), 1) for v in (1, 2)]
    stale = [event_times.Recorded("shop.orders", v, v * S, Hlc(v * S + 7), 1) for v in (2, 3)]
    with store.transaction() as conn:
        event_times.record(conn, {job.job_id: first})
        event_times.record(conn, {job.job_id: stale})  # computed before `first` landed: refused
        recorded = event_times.recorded_after(conn, job.job_id, "shop.orders", 0)
    assert [(r.version, r.event_ts) for r in recorded] == [(1, Hlc(S)), (2, Hlc(2 * S))]


def test_a_cursor_at_an_old_high_water_mark_sees_versions_stamped_after_it(tmp_path):
    store = _store(tmp_path)
    old = _job(store)
    # version 2 was committed at 2 s but stamped 12 s (the job's high-water mark was past 2 s by then)
    stamps = [
        event_times.Recorded("shop.orders", 1, S, Hlc(11 * S), 1),
        event_times.Recorded("shop.orders", 2, 2 * S, Hlc(12 * S), 1),
    ]
    with store.transaction() as conn:
        event_times.record(conn, {old.job_id: stamps})
        assert event_times.first_recorded_above(conn, "orders", "shop.orders", Hlc(11 * S)) == 2
        assert event_times.first_recorded_above(conn, "orders", "shop.orders", Hlc(12 * S)) is None
        assert event_times.first_recorded_above(conn, "other", "shop.orders", Hlc(0)) is None


def test_a_lease_is_fenced_and_taken_from_a_holder_that_is_not_a_live_node(tmp_path):
    store = _store(tmp_path)
    job = _job(store)
    with store.transaction() as conn:
        a = nodes.register(conn, "node-a", "region=east", host="h1", pid=11)
        b = nodes.register(conn, "node-b", "", host="h1", pid=12)
        assert jobs.claim_lease(conn, job.job_id, a.holder, 60) == 1
        live = nodes.live_holders(conn)
        assert live == {"node-a/11", "node-b/12"}
        # a live node's lease is not taken, however long it has to run
        assert jobs.claim_lease(conn, job.job_id, b.holder, 60, lambda h: h not in live) is None
    # A standby node sees so without the write lock, even while another process holds it (waiting for it
    # would end in "database is locked").
    writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    with store.reading() as conn:
        ttl = nodes.LIVENESS_TTL
        assert lease.look(
            conn, [lease.Look(job.job_id, b.holder, 60, ttl), lease.Look(job.job_id, a.holder, 60, ttl)]
        ) == [
            lease.Claim(None),  # held by a live node
            None,  # its own: free to claim
        ]
    writer.rollback()
    with store.transaction() as conn:
        nodes.deregister(conn, a)  # a clean exit: its jobs are free at once
        live = nodes.live_holders(conn)
        epoch = jobs.claim_lease(conn, job.job_id, b.holder, 60, lambda h: h not in live)
    assert epoch == 2
    with store.transaction() as conn, pytest.raises(jobs.LeaseLost):
        fenced.checkpoint(conn, job.job_id, 1, Hlc(20 * S))
    with store.transaction() as conn, pytest.raises(jobs.LeaseLost):  # nor cut a batch
        fenced.cut(conn, job.job_id, 1, "changes", Hlc(20 * S), {"shop.orders": (0, 3)})
    with store.transaction() as conn:
        intent = fenced.cut(conn, job.job_id, epoch, "changes", Hlc(20 * S), {"shop.orders": (0, 3)})
        fenced.checkpoint(conn, job.job_id, epoch, intent.target, [intent])
        assert jobs.get_job(conn, job.job_id).high_water == Hlc(20 * S)
        assert checkpoints.positions(conn, job.job_id) == {"shop.orders": (3, 2)}


def test_a_lease_is_left_and_handed_to_a_node_that_could_coordinate_the_job_and_holds_two_fewer(tmp_path):
    """Nodes share the jobs rather than the first to look taking most of them."""
    from feedctl.coordinator.lease import Claim, Look, Sharing, claim, left_to_peer, shed

    assert left_to_peer({"a/1": 2}, "a/1", {"a/1", "b/2"})
    assert not left_to_peer({"a/1": 2, "b/2": 1}, "a/1", {"a/1", "b/2"})  # one apart: claimed
    assert not left_to_peer({"a/1": 2}, "a/1", {"a/1"})  # no peer
    # among hundreds, a twentieth apart: a few leases' difference moves no job
    assert not left_to_peer({"a/1": 333, "b/2": 320}, "a/1", {"a/1", "b/2"})
    assert left_to_peer({"a/1": 333, "b/2": 317}, "a/1", {"a/1", "b/2"})
    store = _store(tmp_path)
    feeds = [f"f{i}" for i in range(4)]
    with store.transaction() as conn:
        a = nodes.register(conn, "node-a", "region=east", host="h1", pid=11, feeds=tuple(feeds))
        b = nodes.register(conn, "node-b", "region=west", host="h1", pid=12, feeds=tuple(feeds))
        ids = [
            jobs.create_job(conn, f, "sha256:x", definition("shop.orders"), "file://x", Hlc(S), {}).job_id
            for f in feeds
        ]
        for job_id in ids[:2]:
            jobs.claim_lease(conn, job_id, a.holder, 60)

    for feed in feeds:  # both runners of each feed published their view: both could coordinate its job
        with store.transaction() as conn:
            nodes.publish_view(conn, a.node_id, feed, "v", 1)
            nodes.publish_view(conn, b.node_id, feed, "v", 1)

    def claimed(job_id: int, holder: str, wanted: str | None = None) -> Claim:
        return claim(store, Look(job_id, holder, 60, 60, Sharing(feeds[ids.index(job_id)], wanted)))

    assert claimed(ids[2], a.holder) == Claim(None, left=True)  # 2 against 0
    assert claimed(ids[2], a.holder, "region=east") == Claim(1)  # b could not coordinate it
    assert claimed(ids[3], a.holder) == Claim(None, left=True)  # 3 against 0
    assert claimed(ids[3], b.holder) == Claim(1)
    assert claim(store, Look(ids[3], a.holder, 60, 60)) == Claim(None)  # b holds it: nothing to leave
    # a coordinates three jobs, b one: a hands one over, and then no more (two each)
    assert shed(store, ids[0], a.holder, 1, 60, 60, Sharing(feeds[0])) == b.holder
    assert shed(store, ids[1], a.holder, 1, 60, 60, Sharing(feeds[1])) is None
    with store.reading() as conn:
        assert jobs.leases_held(conn) == {a.holder: 2, b.holder: 2}
        assert jobs.get_job(conn, ids[0]).lease_epoch == 2  # a's writes under epoch 1 are fenced out


def test_a_nodes_coordinators_look_at_their_leases_in_one_snapshot_each_finding_what_claim_would(tmp_path):
    """A --follow node's coordinators looking at their leases together (`lease.look` through a shared
    `GroupCommit`) each find what a claim of its own would: held by a live node, free (no holder, its own, an
    expired lease, a dead node's), left to a peer holding two fewer, no such job."""
    store = _store(tmp_path)
    with store.transaction() as conn:
        feeds = tuple(f"f{i}" for i in range(8))
        a = nodes.register(conn, "node-a", "", host="h1", pid=11, feeds=feeds)
        b = nodes.register(conn, "node-b", "", host="h1", pid=12, feeds=feeds)
        ids = [
            jobs.create_job(conn, feed, "sha256:x", definition("shop.orders"), "file://x", Hlc(S), {}).job_id
            for feed in feeds
        ]
        jobs.claim_lease(conn, ids[0], a.holder, 60)  # held by a live node
        jobs.claim_lease(conn, ids[1], b.holder, 60)  # b's own
        jobs.claim_lease(conn, ids[2], a.holder, -1)  # expired
        jobs.claim_lease(conn, ids[3], "node-gone/9", 60)  # no live node holds it
        for job_id in ids[4], ids[6], ids[7]:  # b holds four, a two: the free ids[5] is left to a
            jobs.claim_lease(conn, job_id, b.holder, 60)
        for node in a, b:
            nodes.publish_view(conn, node.node_id, "f5", "v", 1)
        # a lease past its time is still its holder's until another takes it: a renewal late under load does
        # not make its node look as if it held fewer
        assert jobs.leases_held(conn) == {a.holder: 2, b.holder: 4, "node-gone/9": 1}
    looks = [
        lease.Look(ids[0], b.holder, 60, 60),
        lease.Look(ids[1], b.holder, 60, 60, lease.Sharing("f1")),
        lease.Look(ids[2], b.holder, 60, 60),
        lease.Look(ids[3], b.holder, 60, 60),
        lease.Look(ids[5], b.holder, 60, 60, lease.Sharing("f5")),
        lease.Look(ids[5], b.holder, 60, 60, lease.Sharing("f5", "region=west")),  # a is not within it
        lease.Look(ids[5], b.holder, 60, 60),
        lease.Look(max(ids) + 1, b.holder, 60, 60),
    ]
    with store.reading() as conn:
        found = lease.look(conn, looks)
    assert found == [lease.Claim(None), None, None, None, lease.Claim(None, left=True), None, None, lease.Claim(None)]
    shared = GroupCommit(store, lease.look, reading=True)
    assert lease.claim(store, looks[0], looks=shared) == lease.Claim(None)
    assert lease.claim(store, looks[4], looks=shared) == lease.Claim(None, left=True)
    assert lease.claim(store, looks[3], looks=shared) == lease.Claim(2)  # taken over: epoch 2
    assert shared.groups == 3


def test_a_nodes_coordinators_claim_the_leases_they_found_free_together_each_claim_counted_for_the_next(tmp_path):
    """A --follow node's coordinators that found their leases free claim them in one transaction (`lease.take`
    through a shared `GroupCommit`), deciding again there: a claim made earlier in the group counts among the
    node's leases when the next is left to a peer or not, and a lease another node claimed since the look is
    not taken."""
    store = _store(tmp_path)
    feeds = tuple(f"f{i}" for i in range(6))
    with store.transaction() as conn:
        a = nodes.register(conn, "node-a", "", host="h1", pid=11, feeds=feeds)
        b = nodes.register(conn, "node-b", "", host="h1", pid=12, feeds=feeds)
        ids = [
            jobs.create_job(conn, feed, "sha256:x", definition("shop.orders"), "file://x", Hlc(S), {}).job_id
            for feed in feeds
        ]
        for node in a, b:
            for feed in feeds:
                nodes.publish_view(conn, node.node_id, feed, "v", 1)
    looks = [lease.Look(job_id, b.holder, 60, 60, lease.Sharing(feed)) for job_id, feed in zip(ids, feeds)]
    with store.reading() as conn:
        assert lease.look(conn, looks) == [None] * 6  # each alone is free to b
    with store.transaction() as conn:
        jobs.claim_lease(conn, ids[0], a.holder, 60)  # a claims one meanwhile
    with store.transaction() as conn:
        taken = lease.take(conn, looks)
    # b takes three (two against a's one is not yet two fewer), then leaves the rest to a
    assert taken == [
        lease.Claim(None),
        lease.Claim(1),
        lease.Claim(1),
        lease.Claim(1),
        lease.Claim(None, left=True),
        lease.Claim(None, left=True),
    ]
    with store.reading() as conn:
        assert jobs.leases_held(conn) == {a.holder: 1, b.holder: 3}
        assert [jobs.get_job(conn, job_id).coordinator for job_id in ids] == [a.holder] + [b.holder] * 3 + [None] * 2
    takes = GroupCommit(store, lease.take)
    alone = [lease.Look(job_id, a.holder, 60, 60) for job_id in ids[4:]]
    threads = [threading.Thread(target=lambda each=each: lease.claim(store, each, takes=takes)) for each in alone]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with store.reading() as conn:
        assert [jobs.get_job(conn, job_id).lease_epoch for job_id in ids[4:]] == [1, 1]
    assert 1 <= takes.groups <= 2


def test_a_nodes_renewal_of_its_leases_reads_the_standing_that_spares_its_coordinators_a_look_at_handing_over(
    tmp_path,
):
    """Each coordinator of a --follow node looks at handing its job over every 15-45 s: the node's renewal of
    its leases reads how many leases each holder holds and the nodes once for all of them, and only a job a
    live peer working its feed (within its locality) could take, holding two fewer, is looked at in the
    store (`lease.shed`)."""
    from feedctl.coordinator.lease import Heartbeat, Leases

    store = _store(tmp_path)
    with store.transaction() as conn:
        a = nodes.register(conn, "node-a", "region=east", host="h1", pid=11, feeds=("f0", "f1", "f2"))
        b = nodes.register(conn, "node-b", "region=west", host="h1", pid=12, feeds=("f0",))
        ids = [
            jobs.create_job(conn, f"f{i}", "sha256:x", definition("shop.orders"), "file://x", Hlc(S), {}).job_id
            for i in range(3)
        ]
        epochs = [jobs.claim_lease(conn, job_id, a.holder, 60) for job_id in ids]
    leases = Leases(store, 60)
    for job_id, epoch in zip(ids, epochs):
        Heartbeat(store, job_id, a.holder, epoch, 60, leases).__enter__()
    assert leases.standing is None  # not renewed yet: the coordinators look in the store
    with store.transaction(node=True) as conn:
        leases.renew(conn)
    standing = leases.standing
    assert standing.held == {a.holder: 3}
    assert standing.may_shed(a.holder, "f0", None, 60)  # b works f0 and holds none
    assert not standing.may_shed(a.holder, "f1", None, 60)  # no other node works f1
    assert not standing.may_shed(a.holder, "f0", "region=east", 60)  # b is outside f0's locality
    assert not standing.may_shed(a.holder, "f0", None, 0)  # b not live
    with store.transaction() as conn:
        jobs.hand_lease(conn, ids[0], epochs[0], b.holder, 60)
        jobs.hand_lease(conn, ids[1], epochs[1], b.holder, 60)
    with store.transaction(node=True) as conn:
        leases.renew(conn)
    assert leases.standing.held == {a.holder: 1, b.holder: 2}
    assert not leases.standing.may_shed(a.holder, "f0", None, 60)  # even now


def test_a_node_id_is_one_live_process(tmp_path):
    store = _store(tmp_path)
    dead = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    with store.transaction() as conn:
        nodes.register(conn, "n1", "", pid=os.getppid())
        with pytest.raises(nodes.NodeError, match="node n1 is already running"):
            nodes.register(conn, "n1", "")
        nodes.register(conn, "n2", "", pid=dead)
        # its process is gone: dead at once, not after the TTL, its jobs and spans free; a node of another
        # host with the same pid waits out the TTL
        nodes.register(conn, "n4", "", host="elsewhere", pid=dead)
        assert nodes.live_holders(conn) == {f"n1/{os.getppid()}", f"n4/{dead}"}
        assert nodes.working(conn, "f")[1]["n2"] <= time.time()
        again = nodes.register(conn, "n2", "")  # and restarted at once
        assert [n.pid for n in nodes.list_nodes(conn) if n.node_id == "n2"] == [os.getpid()]
        nodes.heartbeat(conn, again)
        nodes.register(conn, "n3", "", host="elsewhere", pid=1)
        stale = time.time() - nodes.LIVENESS_TTL - 1
        conn.execute(update(schema.nodes).where(schema.nodes.c.node_id == "n3").values(heartbeat_at=stale))
        assert "n3/1" not in nodes.live_holders(conn)
        nodes.register(conn, "n3", "")  # a dead node's id is free
    with store.transaction() as conn, pytest.raises(nodes.NodeGone):  # n1's row names another process
        nodes.heartbeat(conn, nodes.Node("n1", "", socket.gethostname(), os.getpid(), 0, 0))


def test_a_runner_never_undoes_a_users_cancel(tmp_path):
    store = _store(tmp_path)
    job = _job(store)
    with store.transaction() as conn:
        jobs.control(conn, job, "cancel")
        assert jobs.finish(conn, job.job_id, "failed", error="boom") is False
        assert jobs.get_job(conn, job.job_id).status == "canceled"


# -- the Delta log ----------------------------------------------------------------------------------------


def test_commits_of_an_old_range_are_read_from_a_long_log(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0]}), configuration={"delta.enableChangeDataFeed": "true"})
    for i in range(1, 25):
        write_deltalake(path, pa.table({"id": [i]}), mode="append")
    source = DeltaSource("shop.t", path)
    assert [c.version for c in source.commits(3, 5)] == [4, 5]
    assert [c.version for c in source.commits(-1, 0)] == [0]
    assert DeltaTable(path).version() == 24


def test_each_version_has_its_own_commit_time_while_another_writer_commits(tmp_path):
    """A version's time is the one its own log file holds, however many commits land while it is read (a
    listing numbered from the newest version gave a version the next one's time, and a cursor at a job's
    high-water mark then fell before a table's first version)."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0]}))
    source, stop = DeltaSource("shop.t", path), threading.Event()

    def writes():
        i = 1
        while not stop.is_set():
            write_deltalake(path, pa.table({"id": [i]}), mode="append")
            i += 1

    writer = threading.Thread(target=writes, daemon=True)
    writer.start()
    try:
        latest = 0
        while latest < 30:  # read over and over while the writer commits 30 versions
            latest = source.latest_version()
            for commit in source.commits(-1, latest):
                info = next(
                    json.loads(line)["commitInfo"]
                    for line in (tmp_path / "t/_delta_log" / f"{commit.version:020d}.json").read_text().splitlines()
                    if line.startswith('{"commitInfo"')
                )
                assert commit.commit_ns == info["timestamp"] * 1_000_000, commit
    finally:
        stop.set()
        writer.join()


def test_commits_cleaned_from_the_log_are_a_clear_source_error_naming_them(tmp_path):
    path = tmp_path / "t"
    for i in range(30):
        write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
    DeltaTable(str(path)).create_checkpoint()
    for version in range(12):  # as the log's cleanup does, once a checkpoint holds them
        (path / "_delta_log" / f"{version:020d}.json").unlink()
    source = DeltaSource("shop.t", str(path))
    assert [c.version for c in source.commits(20, 29)] == list(range(21, 30))
    with pytest.raises(SourceError, match=r"versions 0\.\.11 are no longer in its log .* continue from version -1"):
        source.commits(-1, 29)
    with pytest.raises(SourceError, match="version 11 is no longer in its log"):
        source.commits(10, 29)
    (path / "_delta_log" / f"{29:020d}.json").write_text('{"commitInfo": {"timestamp": 1\n')  # cut short
    with pytest.raises(SourceError, match="table shop.t: version 29 of the log is not valid JSON"):
        DeltaSource("shop.t", str(path)).commits(27, 29)


def test_a_missing_table_is_a_clear_source_error(tmp_path):
    with pytest.raises(SourceError, match=r"table shop\.gone .*cannot be opened"):
        DeltaSource("shop.gone", str(tmp_path / "gone")).latest_version()


def test_one_running_or_paused_job_per_feed(tmp_path):
    store = _store(tmp_path)
    first = _job(store)
    with pytest.raises(jobs.JobExists, match=f"feed orders has job {first.job_id}"):
        _job(store)
    # where two transactions both got past the look-up (PostgreSQL), the index fails the second insert
    with store.transaction() as conn, pytest.raises(IntegrityError):
        conn.execute(insert(schema.jobs).values({**_row(conn, first.job_id), "job_id": first.job_id + 1}))
    with store.transaction() as conn:
        jobs.control(conn, first, "cancel")
    assert _job(store).job_id != first.job_id  # a canceled job leaves room for the next


def test_a_feeds_versions_each_have_one_running_or_paused_job(tmp_path):
    store = _store(tmp_path)
    first, second = _job(store), _job(store, version=2)
    with pytest.raises(jobs.JobExists, match=f"feed orders@v2 has job {second.job_id}"):
        _job(store, version=2)
    with store.reading() as conn:
        assert jobs.newest_job(conn, "orders", 1).job_id == first.job_id
        assert jobs.find_job(conn, "orders").job_id == second.job_id  # the newest, whatever its version
        assert jobs.find_job(conn, "orders@v1").job_id == first.job_id
        assert [j.job_id for j in jobs.other_versions(conn, "orders", 2)] == [first.job_id]
    with store.transaction() as conn, pytest.raises(IntegrityError):  # the index holds per version
        conn.execute(insert(schema.jobs).values({**_row(conn, second.job_id), "job_id": second.job_id + 1}))
    with store.transaction() as conn:
        jobs.control(conn, first, "cancel")
        assert jobs.other_versions(conn, "orders", 2) == []


def test_upgrading_a_store_of_schema_8_keeps_its_jobs_as_version_1(tmp_path):
    store = _store(tmp_path)
    job = _job(store)
    with store.transaction() as conn:  # as schema 8 had it: no version, one active job per feed
        conn.execute(text("DROP INDEX one_active_job_per_version"))
        conn.execute(text("ALTER TABLE jobs DROP COLUMN version"))
        conn.execute(text("CREATE UNIQUE INDEX one_active_job_per_feed ON jobs (feed) WHERE status = 'running'"))
        conn.execute(update(schema.meta).values(value="8"))
    store = _store(tmp_path)
    with store.reading() as conn:
        assert jobs.get_job(conn, job.job_id).version == 1
    assert _job(store, version=2).version == 2  # the old index is gone
    with pytest.raises(jobs.JobExists):
        _job(store)


def test_upgrading_a_store_that_has_two_active_jobs_of_a_feed(tmp_path):
    store = _store(tmp_path)
    older = _job(store)
    with store.transaction() as conn:  # as a store of schema 1 could hold
        conn.execute(text("DROP INDEX one_active_job_per_version"))
        conn.execute(update(schema.meta).values(value="1"))
        newer = {**_row(conn, older.job_id), "job_id": older.job_id + 1, "created_at": older.created_at + 1}
        conn.execute(insert(schema.jobs).values(newer))
    store = _store(tmp_path)
    with store.transaction() as conn:
        kept, failed = jobs.get_job(conn, older.job_id + 1), jobs.get_job(conn, older.job_id)
    assert kept.status == "running" and failed.status == "failed"
    assert f"job {kept.job_id} is kept" in failed.error
    with pytest.raises(jobs.JobExists):
        _job(store)


def _row(conn, job_id: int) -> dict:
    return dict(conn.execute(select(schema.jobs).where(schema.jobs.c.job_id == job_id)).first()._mapping)


def test_many_jobs_are_fenced_at_once_and_only_those_whose_epoch_holds_a_running_job_written(tmp_path):
    store = _store(tmp_path)
    held, stale, paused = (_job(store, version=v) for v in (1, 2, 3))
    with store.transaction() as conn:
        epochs = {j.job_id: jobs.claim_lease(conn, j.job_id, "n/1", 60) for j in (held, stale, paused)}
        jobs.control(conn, paused, "pause")
    with store.transaction() as conn:
        written = jobs.fence(
            conn,
            [(held.job_id, epochs[held.job_id]), (stale.job_id, epochs[stale.job_id] + 1)]
            + [(paused.job_id, epochs[paused.job_id])],
            **checkpoints.mark_values(Hlc(30 * S)),
        )
    assert written == {held.job_id}
    with store.reading() as conn:
        marks = {j.job_id: jobs.get_job(conn, j.job_id).high_water for j in (held, stale, paused)}
    assert marks[held.job_id] == Hlc(30 * S)
    assert marks[stale.job_id] < Hlc(30 * S) and marks[paused.job_id] < Hlc(30 * S)
