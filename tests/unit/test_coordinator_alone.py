"""The coordinator of a job, stepped alone over real Delta tables with the test playing the nodes (no Spark):
what it cuts, places and checkpoints, and how many write transactions a step takes."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from support.coordinating import CoordinatorAlone
from support.e2e import file_sink, write_project
from support.projects import write_delta
from feedctl.state.progress import IntentKind


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
    alone = CoordinatorAlone(root, "f")
    try:
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
    finally:
        alone.close()


def test_a_step_in_steady_state_opens_few_write_transactions(project):
    """Measured, not timed: how many times a step takes the store's write lock, a commit waiting."""
    root, path = project
    alone = CoordinatorAlone(root, "f")
    try:
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
        assert max(counts) <= 11
    finally:
        alone.close()
