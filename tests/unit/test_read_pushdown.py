"""Pushdown at read time, on a real Delta table partitioned by a column spelled in mixed case: the files a
condition rules out are not read, for change data and for snapshots. (No Spark: tests/spark/test_run_pushdown.py
runs a feed through it.)"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from feedctl.source.delta import DeltaSource, SourceError

REGIONS = [f"r{i}" for i in range(10)]
IN_R3 = "`Region` = 'r3'"


@pytest.fixture
def source(tmp_path) -> DeltaSource:
    """Ten partitions; then an update, a delete and an append touching every one of them."""
    path = str(tmp_path / "t")
    rows = pa.table(
        {
            "id": pa.array(range(500), pa.int64()),
            "Region": [REGIONS[i % 10] for i in range(500)],
            "v": pa.array(range(500), pa.int64()),
        }
    )
    write_deltalake(path, rows, partition_by=["Region"], configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(path).update(updates={"v": "v + 1000"}, predicate="id < 100")
    DeltaTable(path).delete("id >= 450")
    write_deltalake(path, rows.slice(0, 50).set_column(0, "id", pa.array(range(500, 550), pa.int64())), mode="append")
    return DeltaSource("s.t", path)


def hide_other_partitions(source: DeltaSource, keep: str) -> None:
    """Move every partition's files but `keep`'s out of the table: a reader that opens one fails."""
    root = source.location
    for folder in (f"{root}", f"{root}/_change_data"):
        for region in REGIONS:
            if region != keep:
                shutil.move(f"{folder}/Region={region}", f"{folder}-hidden-{region}")


def test_change_data_read_with_a_partition_condition_opens_only_that_partition(source):
    everything = source.changes(0, 3).read_all()
    expected = sorted(r["id"] for r in everything.to_pylist() if r["Region"] == "r3")
    hide_other_partitions(source, "r3")
    got = source.changes(0, 3, ["id", "Region"], IN_R3).read_all()
    assert sorted(got["id"].to_pylist()) == expected and len(expected) == 2 * 10 + 5 + 5  # updated, deleted, appended
    assert set(got["Region"].to_pylist()) == {"r3"}
    with pytest.raises(SourceError, match="a data file is gone"):  # without the condition, the hidden files
        source.changes(0, 3).read_all()


def test_snapshot_read_with_a_partition_condition_opens_only_that_partition(source):
    files, size, total_files, total_size, rows = source.snapshot_files(3, IN_R3)
    assert (files, total_files) == (2, 20) and 0 < size * 20 < total_size * 3  # r3: its first file and the append
    expected = sorted(r["id"] for r in source.snapshot(3).read_all().to_pylist() if r["Region"] == "r3")
    assert rows == len(expected)  # by the Delta log's row counts
    hide_other_partitions(source, "r3")
    shares = [source.snapshot(3, ["id"], share, 2, IN_R3).read_all()["id"].to_pylist() for share in range(2)]
    assert sorted(shares[0] + shares[1]) == expected and all(shares)
    with pytest.raises(SourceError, match="a data file is gone"):
        source.snapshot(3).read_all()


def test_key_condition_skips_files_by_their_statistics(source):
    files, _, total_files, _, rows = source.snapshot_files(3, "`id` >= 500")
    assert (files, total_files, rows) == (10, 20, 50)  # the append's files alone hold ids from 500
    assert sorted(source.changes(2, 3, None, "`id` >= 500").read_all()["id"].to_pylist()) == list(range(500, 550))


def test_a_condition_the_reader_cannot_evaluate_reads_everything(source):
    # a literal of another type than its column: Spark would compare it, the reader refuses it
    refused = "`v` = 'x'"
    assert source.snapshot_files(3, refused)[0] == 20
    assert source.changes(0, 3, ["id", "v"], refused).read_all().num_rows == source.changes(0, 3).read_all().num_rows
