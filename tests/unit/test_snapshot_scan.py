"""An initial scan read by the span tasks themselves: the shares of a snapshot hold every row once, the
same rows each time; each task's rows come out as inserts at the job's start. (No Spark: the end-to-end
runs cover scans through Spark.)"""

from __future__ import annotations

import polars as pl
import pyarrow as pa
from deltalake import WriterProperties, write_deltalake

from feedctl import frame
from feedctl.encoding.envelope import Envelope
from feedctl.sinks.sink import TaskTarget
from feedctl.source.delta import DeltaSource
from feedctl.source.snapshot import SnapshotScan
from feedctl.tasks import pairing
from feedctl.tasks.batch import BatchPart, emit_partition, emit_spans


def table(path, files: int, rows_per_group: int, partitioned: bool = False) -> DeltaSource:
    for f in range(files):
        ids = list(range(f * 100, f * 100 + 40))
        data = pa.table(
            {"id": pa.array(ids, pa.int64()), "city": [f"c{i % 2}" for i in ids], "v": [f"v{i}" for i in ids]}
        )
        write_deltalake(
            str(path),
            data,
            mode="append",
            partition_by=["city"] if partitioned else None,
            writer_properties=WriterProperties(max_row_group_size=rows_per_group),
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    return DeltaSource("s.t", str(path))


def ids(reader: pa.RecordBatchReader) -> list[int]:
    return reader.read_all()["id"].to_pylist()


def test_shares_hold_every_row_once_whether_split_by_file_or_by_row_group(tmp_path):
    for name, files, shares, partitioned in (
        ("by_file", 5, 2, False),
        ("by_group", 2, 3, False),
        ("partitioned", 2, 3, True),
    ):
        source = table(tmp_path / name, files, rows_per_group=10, partitioned=partitioned)
        version = source.latest_version()
        whole = sorted(ids(source.snapshot(version)))
        parts = [ids(source.snapshot(version, share=s, shares=shares)) for s in range(shares)]
        assert sorted(i for p in parts for i in p) == whole and len(whole) == files * 40, name
        assert all(parts), f"{name}: a share is empty"
        assert parts == [ids(source.snapshot(version, share=s, shares=shares)) for s in range(shares)], (
            f"{name}: a share read again holds other rows"
        )
        rows = source.snapshot(version, share=shares - 1, shares=shares).read_all().to_pylist()
        assert rows and all(r["city"] == f"c{r['id'] % 2}" and r["v"] == f"v{r['id']}" for r in rows), name


def test_a_scans_share_becomes_inserts_at_the_jobs_start(tmp_path):
    source = table(tmp_path / "t", 2, rows_per_group=10, partitioned=True)
    version = source.latest_version()
    scan = SnapshotScan("s.t", source.location, None, version, ["id", "v"], None, (1_000, 7), 900, 2)
    view = pl.concat(list(pairing.task_changes(scan, 1, ["id", "v"], ["id"])))
    assert view.height and set(view[frame.OP]) == {"insert"} and set(view[frame.SPAN]) == {1}
    assert set(zip(view[frame.TS_WALL], view[frame.TS_LOGICAL], view[frame.MVCC_WALL])) == {(1_000, 7, 900)}
    assert "city" not in view.columns  # only the columns the feed reads
    assert view.columns[:2] == ["id", "v"] and view["id"].to_list() == ids(source.snapshot(version, share=1, shares=2))


def test_a_task_that_cannot_read_its_share_returns_why_as_its_result(tmp_path):
    """What no retry fixes crosses the Spark boundary as a result, not as the text of a failed task."""
    source = table(tmp_path / "t", 2, rows_per_group=10)
    version = source.latest_version()
    for data in (tmp_path / "t").glob("*.parquet"):  # vacuumed from under the scan
        data.unlink()
    scan = SnapshotScan("s.t", source.location, None, version, None, None, (1_000, 0), 900, 1)
    target = TaskTarget("null", "s.t", "t", 0, 1, 1, "json", Envelope())
    part = BatchPart(scan, ["id", "city", "v"], ["id"], target)
    [result] = emit_spans([0], [part], diff=False)
    assert result["terminal"] and "a data file is gone" in result["error"], result


def test_a_cdc_querys_task_that_cannot_read_its_share_says_why_to_the_task_writing_the_querys_output(tmp_path):
    """With a CDC query, the changes are read by the task feeding Spark's query: what no retry fixes becomes a
    row of its own (every other column null), which the writing task returns as its result."""
    source = table(tmp_path / "t", 2, rows_per_group=10)
    version = source.latest_version()
    for data in (tmp_path / "t").glob("*.parquet"):
        data.unlink()
    scan = SnapshotScan("s.t", source.location, None, version, ["id", "v"], None, (1_000, 0), 900, 1)
    times = [(frame.SPAN, pa.int32()), (frame.TS_WALL, pa.int64()), (frame.TS_LOGICAL, pa.int32())]
    rows = pa.schema([("id", pa.int64()), ("v", pa.string()), *times, (frame.MVCC_WALL, pa.int64())])
    schema = pairing.view_schema(rows, ["id", "v"], ["id"])
    assert all(f.nullable for f in schema)
    task = [pa.record_batch({"id": pa.array([0], pa.int64())})]
    [row] = list(pairing.view_partition(task, scan, ["id", "v"], ["id"], schema))
    assert row.num_rows == 1 and "a data file is gone" in row.column(frame.ERROR)[0].as_py()
    assert all(row.column(c).null_count == 1 for c in row.schema.names if c != frame.ERROR)

    target = TaskTarget("null", "s.t", "t", 0, 1, 1, "json", Envelope())
    [results] = list(emit_partition([row], target))
    [result] = results.to_pylist()
    assert result["error"] == row.column(frame.ERROR)[0].as_py() and result["file"] is None
