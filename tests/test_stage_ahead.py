"""Staging the next batch ahead: what it stages is what staging the intent would, and a wrong guess leaves
nothing behind. (No Spark: the end-to-end runs cover batches taken from what was staged ahead.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import write_delta
from deltalake import write_deltalake

from feedctl.coordinator.execute import FeedPlan, stage_folder, stage_table
from feedctl.coordinator.stage_ahead import NextBatch, StageAhead
from feedctl.source.delta import DeltaSource
from feedctl.state.progress import Recorded
from feedctl.units import Hlc

TABLE = "s.t"


def plan_of(tmp_path: Path) -> tuple[FeedPlan, dict[str, list[Recorded]]]:
    path = write_delta(tmp_path / "t", {"id": "int64", "v": "string"})
    for version in range(1, 4):
        write_deltalake(str(path), pa.table({"id": pa.array(range(version * 10, version * 10 + 10), pa.int64()),
                                             "v": [f"v{version}"] * 10}), mode="append")
    recorded = [Recorded(TABLE, v, v * 1000, Hlc(v * 1000, v), 10) for v in range(1, 4)]
    plan = FeedPlan(job_id=7, sources={TABLE: DeltaSource(TABLE, str(path))}, keys={TABLE: ["id"]}, columns={},
                    spans={TABLE: 3}, sql=None, options={}, sink_uri="null://", sink_kind="null", sink_options={},
                    project_root=str(tmp_path), start=Hlc(1), stage_root=tmp_path / "stage")
    return plan, {TABLE: recorded}


def contents(folder: str) -> dict[str, list[dict]]:
    """Each span file's rows; in any order (delta-rs reads a change feed's files concurrently; a task sorts)."""
    return {p.name: sorted(pq.read_table(p).to_pylist(), key=lambda r: (r["id"], r["_commit_version"]))
            for p in sorted(Path(folder).glob("*.parquet"))}


def test_a_table_staged_ahead_holds_what_staging_its_intent_would(tmp_path):
    plan, recorded = plan_of(tmp_path)
    ahead = StageAhead(plan)
    ahead.start(NextBatch(2, {TABLE: (0, 3)}, recorded))
    taken = ahead.take(TABLE, 0, 3)
    inline = stage_table(plan, TABLE, 0, 3, recorded[TABLE], stage_folder(plan, 2))
    ahead.close()
    assert taken is not None and taken.path != inline.path
    assert taken.rows == inline.rows == 30 and taken.schema == inline.schema
    assert contents(taken.path) == contents(inline.path)
    assert Path(taken.path).is_relative_to(plan.stage_root / "7" / "2")  # removed with batch 2's checkpoint


def test_a_wrong_guess_is_staged_again_and_its_files_removed(tmp_path):
    plan, recorded = plan_of(tmp_path)
    ahead = StageAhead(plan)
    ahead.start(NextBatch(2, {TABLE: (0, 2)}, {TABLE: recorded[TABLE][1:2]}))
    assert ahead.take(TABLE, 0, 3) is None  # the batch came out larger: not what was staged
    ahead.start(NextBatch(3, {TABLE: (2, 3)}, {TABLE: recorded[TABLE][2:]}))
    ahead.close()
    assert not any(p.suffix == ".parquet" for p in plan.stage_root.rglob("*")), "an unused staging was left"
