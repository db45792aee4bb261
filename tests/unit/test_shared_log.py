"""The feeds of one --follow node over a table read its log once (`source/shared_log.py`): the node's watch
reads the commits it finds, and whether they change the schema, before it tells the feeds; each feed's cut
then finds them read. What they are told is what the table's log holds, as deltalake reads it."""

from __future__ import annotations

import threading

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from feedctl.node.watch import NodeWatch
from feedctl.source.delta import DeltaSource
from feedctl.source.shared_log import SHARED_RANGE
from feedctl.state.store import StateStore


def _append(path, i: int, **columns) -> None:
    table = pa.table({"id": pa.array([i], pa.int64()), **{k: pa.array([v]) for k, v in columns.items()}})
    write_deltalake(str(path), table, mode="append", schema_mode="merge")


def _watched(path, feeds: int) -> tuple[NodeWatch, list[DeltaSource]]:
    store = StateStore(f"sqlite:///{path.parent}/state.db", path.parent)  # not read: the tables' looks alone
    watch = NodeWatch(store, "n1", poll_interval=60, liveness_ttl=10, span_grace=5)
    sources = [DeltaSource("shop.t", str(path)) for _ in range(feeds)]
    for job_id, source in enumerate(sources):
        watch.add(job_id, {"shop.t": source}, threading.Event(), threading.Event(), lambda: None)
    return watch, sources


def test_the_commits_a_node_finds_are_read_once_for_every_feed_over_the_table(tmp_path):
    path = tmp_path / "t"
    _append(path, 0)
    watch, feeds = _watched(path, 3)
    watch.look_at_tables()  # the first look: version 0
    _append(path, 1)
    _append(path, 2, note="added")  # a column added: a schema change at version 2
    _append(path, 3)
    watch.look_at_tables()  # finds versions 1..3 and reads them before telling the feeds

    # The commits read ahead are gone from the log (the newest stays: it is how the next look begins); the
    # feeds still have them, as the node read them, and never read them again.
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for version in (1, 2):
        (path / "_delta_log" / f"{version:020d}.json").rename(hidden / f"{version:020d}.json")
    logs = [watch.log(feed).of(feed) for feed in feeds]
    seen = [[(c.version, c.operation) for c in log.commits(0, 3)] for log in logs]
    assert [log.schema_changes(0, 3) for log in logs] == [[2]] * 3
    for version in (1, 2):
        (hidden / f"{version:020d}.json").rename(path / "_delta_log" / f"{version:020d}.json")

    history = {h["version"]: h["operation"] for h in DeltaTable(str(path)).history()}
    assert seen == [[(v, history[v]) for v in (1, 2, 3)]] * 3
    names = [DeltaTable(str(path), version=v).schema().to_arrow().names for v in (1, 2)]
    assert names == [["id"], ["id", "note"]]
    assert logs[0].schema_change(2).added == ("note",)


def test_a_feed_far_behind_reads_its_long_range_itself(tmp_path):
    path = tmp_path / "t"
    for i in range(SHARED_RANGE + 3):
        _append(path, i)
    watch, (feed,) = _watched(path, 1)
    newest = SHARED_RANGE + 2
    log = watch.log(feed).of(feed)
    assert [c.version for c in log.commits(0, newest)] == list(range(1, newest + 1))
    assert log.schema_changes(0, newest) == []
    assert watch.log(DeltaSource("shop.other", str(path))) is None  # no job of the node reads it
