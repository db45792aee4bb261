"""The training batch behind the class-data archive (`class_archive`): a small batch through every Spark path
a run takes (tasks per span, Arrow to and from Python, a CDC query in Spark SQL), in a JVM that writes the
classes it loaded to the archive on exit. `class_archive.build` runs it in a process of its own."""

from __future__ import annotations

import tempfile
from pathlib import Path


def small_batch(work: Path, rows: int):
    """A table of `rows` inserts over two spans, staged as a batch of changes in `work`, and a `file://` sink
    there: (the staged spans, the sink)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from feedctl.sinks.registry import open_sink
    from feedctl.source.delta import DeltaSource
    from feedctl.source.stage import Layout, Stager
    from feedctl.source.staging_area import StagingArea
    from feedctl.state.event_times import Recorded
    from feedctl.units import Hlc

    data = pa.table({"id": pa.array(range(rows), pa.int64()), "v": [f"v{i}" for i in range(rows)]})
    write_deltalake(str(work / "t"), data, configuration={"delta.enableChangeDataFeed": "true"})
    stager = Stager(StagingArea(str(work / "stage")), 1, {"s.t": DeltaSource("s.t", str(work / "t"))}, {"s.t": 2}, {})
    recorded = [Recorded("s.t", 0, 1, Hlc(1, 0), rows)]
    staged = stager.stage("s.t", -1, 0, recorded, 0, Layout(["id"]))
    return staged, open_sink(f"file://{work}/out", {"partition_format": "flat"}, str(work))


def train(archive: Path) -> None:
    from feedctl.encoding.envelope import Envelope
    from feedctl.spark import session
    from feedctl.spark.place import SparkPlace
    from feedctl.tasks.batch import TableBatch, run_batch

    archiving = f"-XX:ArchiveClassesAtExit={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    spark = session.spark_session(SparkPlace("local[2]", {"spark.driver.extraJavaOptions": archiving}))
    with tempfile.TemporaryDirectory(prefix="feedctl-archive-") as tmp:
        staged, sink = small_batch(Path(tmp), 100)
        envelope = Envelope(updated=True, diff=True)
        for i, (sql, fmt) in enumerate(
            [(None, "json"), ("SELECT id FROM s.t WHERE v > 'v5'", "json"), (None, "parquet")]
        ):
            target = sink.target("s.t", "t", 1, 1, i, fmt, envelope)
            table = TableBatch(
                "s.t", staged.spans(), staged.schema, ["id", "v"], ["id"], [0, 1], sql, target, "1.0", True
            )
            run_batch(spark, [table])
    process = getattr(spark.sparkContext._gateway, "proc", None)
    spark.stop()
    if process is not None:
        process.stdin.close()  # the JVM exits when its gateway's input closes, and writes the archive then
        process.wait(timeout=300)
