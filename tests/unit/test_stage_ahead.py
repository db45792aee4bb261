"""Staging the next batch ahead: what it stages is what staging the intent would, only this node's spans,
and staging left unused leaves nothing behind. (No Spark: the end-to-end runs cover batches taken from what was
staged ahead.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

from feedctl.source.delta import DeltaSource
from feedctl.source.stage import Layout, Stager
from feedctl.source.stage_ahead import NextBatch, StageAhead
from feedctl.source.staging_area import StagingArea
from feedctl.state.event_times import Recorded
from feedctl.units import Hlc
from support import write_delta

TABLE = "s.t"
LAYOUT = Layout(["id"])  # the table's key, no regions


def plan_of(tmp_path: Path) -> tuple[Stager, dict[str, list[Recorded]]]:
    path = write_delta(tmp_path / "t", {"id": "int64", "v": "string"})
    for version in range(1, 4):
        write_deltalake(
            str(path),
            pa.table({"id": pa.array(range(version * 10, version * 10 + 10), pa.int64()), "v": [f"v{version}"] * 10}),
            mode="append",
        )
    recorded = [Recorded(TABLE, v, v * 1000, Hlc(v * 1000, v), 10) for v in range(1, 4)]
    stager = Stager(StagingArea(str(tmp_path / "stage")), 7, {TABLE: DeltaSource(TABLE, str(path))}, {TABLE: 3}, {})
    return stager, {TABLE: recorded}


def contents(folder: str) -> dict[str, list[dict]]:
    """Each span file's rows; in any order (delta-rs reads a change feed's files concurrently; a task sorts)."""
    return {
        p.name: sorted(pq.read_table(p).to_pylist(), key=lambda r: (r["id"], r["_commit_version"]))
        for p in sorted(Path(folder).glob("*.parquet"))
    }


def test_a_table_staged_ahead_holds_what_staging_its_intent_would(tmp_path):
    plan, recorded = plan_of(tmp_path)
    ahead = StageAhead(plan, worth=0)
    ahead.start(NextBatch(2, {TABLE: (0, 3)}, recorded, {TABLE: [0, 1, 2]}, {TABLE: LAYOUT}))
    taken = ahead.take(TABLE, 0, 3, [0, 1, 2])
    inline = plan.stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)
    ahead.close()
    assert taken is not None and taken.path != inline.path
    assert taken.rows == inline.rows == 30 and taken.schema == inline.schema
    assert contents(taken.path) == contents(inline.path)
    # removed once the node's spans have emitted batch 2
    assert Path(taken.path).is_relative_to(tmp_path / "stage" / "7" / "node" / "2")


def test_a_node_stages_only_its_own_spans(tmp_path):
    plan, recorded = plan_of(tmp_path)
    whole = plan.stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT)
    mine = plan.stage(TABLE, 0, 3, recorded[TABLE], 2, LAYOUT, keep=[0, 2])
    assert set(mine.span_rows) == {0, 2} and mine.rows == whole.rows - whole.span_rows[1]
    assert {n: rows for n, rows in contents(whole.path).items() if n != "span-00001.parquet"} == contents(mine.path)


def test_staging_left_unused_is_removed(tmp_path):
    plan, recorded = plan_of(tmp_path)
    ahead = StageAhead(plan, worth=0)
    ahead.start(NextBatch(2, {TABLE: (0, 2)}, {TABLE: recorded[TABLE][1:2]}, {TABLE: [0, 1, 2]}, {TABLE: LAYOUT}))
    assert ahead.take(TABLE, 0, 2, [0, 1]) is None  # span 2 moved to another node meanwhile
    ahead.start(NextBatch(3, {TABLE: (2, 3)}, {TABLE: recorded[TABLE][2:]}, {TABLE: [0, 1]}, {TABLE: LAYOUT}))
    ahead.close()
    assert not any(p.suffix == ".parquet" for p in (tmp_path / "stage").rglob("*")), "an unused staging was left"


def test_a_few_changes_are_staged_when_their_turn_comes_not_ahead(tmp_path):
    """Staging ahead is for batches that take long to stage: a node of hundreds of feeds staging each small
    batch ahead would keep hundreds of threads busy beside their runners."""
    plan, recorded = plan_of(tmp_path)
    ahead = StageAhead(plan, worth=31)  # the batch holds 30 changes
    ahead.start(NextBatch(2, {TABLE: (0, 3)}, recorded, {TABLE: [0, 1, 2]}, {TABLE: LAYOUT}))
    assert ahead.take(TABLE, 0, 3, [0, 1, 2]) is None
    ahead.close()
    assert not (tmp_path / "stage").exists() or not any((tmp_path / "stage").rglob("*.parquet"))
