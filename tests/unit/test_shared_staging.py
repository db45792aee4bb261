"""Read once, deliver many: feeds of one node staging the same versions of a table the same way read them
from Delta once and take the same files; a feed reading them otherwise (other columns, other spans) reads
its own; the files go once every batch holding them is emitted, and a feed behind finds them gone and reads
again. (No Spark: the nodes' test runs feeds sharing what they stage.)"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_stage_ahead import LAYOUT, TABLE, contents, plan_of

from feedctl.compiler.read_plan import Pushdown
from feedctl.source.delta import DeltaSource
from feedctl.source.shared_staging import SharedStaging
from feedctl.source.stage import Stager
from feedctl.source.staging_area import StagingArea


def stager_of(tmp_path: Path, job: int, shared: SharedStaging, pushdown=None) -> Stager:
    source = DeltaSource(TABLE, str(tmp_path / "t"))
    return Stager(StagingArea(str(tmp_path / "stage")), job, {TABLE: source}, {TABLE: 3}, pushdown or {}, "n1", shared)


class CountingSource(DeltaSource):
    reads = 0

    def changes(self, *args, **kwargs):
        CountingSource.reads += 1
        return super().changes(*args, **kwargs)


def test_feeds_staging_the_same_changes_read_them_once_and_share_the_files_until_the_last_is_done(tmp_path):
    _, recorded = plan_of(tmp_path)
    shared = SharedStaging()
    stagers = [stager_of(tmp_path, job, shared) for job in range(1, 6)]
    for stager in stagers:
        stager.sources[TABLE] = CountingSource(TABLE, str(tmp_path / "t"))
    got = [None] * len(stagers)

    def stage(i: int) -> None:
        got[i] = stagers[i].stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)

    threads = [threading.Thread(target=stage, args=(i,)) for i in range(len(stagers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert CountingSource.reads == 1, "read from Delta once"
    assert len({s.path for s in got}) == 1 and all(s.rows == 30 for s in got)
    assert sum(not s.taken for s in got) == 1 and (shared.reads, shared.taken) == (1, 4)
    alone = Stager(
        StagingArea(str(tmp_path / "own")), 9, {TABLE: DeltaSource(TABLE, str(tmp_path / "t"))}, {TABLE: 3}, {}
    )
    expected = contents(alone.stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT).path)
    assert contents(got[0].path) == expected

    for stager in stagers[:-1]:
        stager.clean(2)
        assert Path(got[0].path).exists(), "held by a batch not yet emitted"
    stagers[-1].clean(2)
    assert not Path(got[0].path).exists()

    late = stagers[0].stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)  # a feed behind: read again
    assert not late.taken and late.path != got[0].path and contents(late.path) == expected


def test_what_an_earlier_process_of_the_node_left_is_removed(tmp_path):
    _, recorded = plan_of(tmp_path)
    left = tmp_path / "stage" / "shared" / "n1" / "0123456789ab"
    left.mkdir(parents=True)
    (left / "span-00000.parquet").write_bytes(b"from a node killed mid-batch")
    staged = stager_of(tmp_path, 1, SharedStaging()).stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)
    assert not left.exists() and Path(staged.path).parent == left.parent


def test_changes_staged_otherwise_are_read_apart(tmp_path):
    _, recorded = plan_of(tmp_path)
    shared = SharedStaging()
    whole = stager_of(tmp_path, 1, shared).stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)
    narrow = stager_of(tmp_path, 2, shared, {TABLE: Pushdown(columns=["id"])}).stage(
        TABLE, 0, 3, recorded[TABLE], 2, LAYOUT
    )
    mine = stager_of(tmp_path, 3, shared).stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT, keep=[0, 2])
    later = stager_of(tmp_path, 4, shared).stage(TABLE, 1, 3, recorded[TABLE][1:], 2, LAYOUT)
    assert not any(s.taken for s in (whole, narrow, mine, later)) and shared.reads == 4
    assert "v" not in narrow.schema.names and set(mine.span_rows) == {0, 2} and later.rows == 20


def test_a_failed_read_is_tried_again_by_the_next_feed(tmp_path):
    _, recorded = plan_of(tmp_path)
    shared = SharedStaging()
    broken = stager_of(tmp_path, 1, shared)
    broken.sources[TABLE] = DeltaSource(TABLE, str(tmp_path / "missing"))
    with pytest.raises(Exception, match="missing"):
        broken.stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)
    staged = stager_of(tmp_path, 2, shared).stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)
    assert not staged.taken and staged.rows == 30
    assert [str(p) for p in (tmp_path / "stage" / "shared" / "n1").iterdir()] == [staged.path]
