"""One batch in Spark: the staged changes of each table → spans sorted by time and key → changes → CDC
query → files.

Rows are hash-partitioned by span once and sorted within each partition by (span, event timestamp, key,
version), so that one task holds each span whole and meets its changes in emission order. The task pairs
a commit's before and after images of a key itself (`pairing`), in one columnar pass. A feed with a CDC
query pairs in a Python step of its own, since the query runs in Spark over the paired changes; a filter and a
projection keep each partition's order, so no second sort is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial, reduce

from feedctl.aggregator import pairing, query
from feedctl.aggregator.emit import RESULT_DDL, EmitConfig, emit_partition
from feedctl.encoding import frame


@dataclass(frozen=True)
class TableBatch:
    table: str  # source.table
    staged: str  # folder of staged Parquet changes
    columns: list[str]  # the table's columns, in order
    key: list[str]
    spans: int
    sql: str | None  # the feed's compiled CDC query, if any
    emit: EmitConfig


def sorted_rows(spark, t: TableBatch):
    """The staged change-feed rows, each span whole in one partition, in (span, event timestamp, key,
    version) order: a key's rows of one commit are adjacent."""
    from pyspark.sql import functions as F

    key = [F.col(k) for k in t.key]
    df = spark.read.parquet(t.staged).withColumn(frame.SPAN, F.pmod(F.hash(*key), F.lit(t.spans)).cast("int"))
    # Spark places a row in partition pmod(hash(key), n): with n = spans that is its span, so each task
    # holds one span. (Partitioning by the span column would hash the span number again, and two spans
    # could share a task while another task idles.)
    return df.repartition(t.spans, *key).sortWithinPartitions(
        frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, *t.key, pairing.VERSION)


def change_view(spark, t: TableBatch):
    """The paired changes (`pairing.pair`), as a DataFrame for the CDC query."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    rows = sorted_rows(spark, t)
    schema = pairing.view_schema(to_arrow_schema(rows.schema), t.columns, t.key)
    return rows.mapInArrow(partial(pairing.view_partition, columns=t.columns, key=t.key), from_arrow_schema(schema))


def messages(spark, t: TableBatch, view_name: str, start_hlc: str, diff: bool):
    """What the emitters consume, partitioned by span and in emission order: without a CDC query the sorted
    rows themselves (paired where they are emitted); with one, the query over the change view."""
    if t.sql is None:
        return sorted_rows(spark, t)
    change_view(spark, t).createOrReplaceTempView(view_name)
    return spark.sql(query.spark_sql(t.sql, t.table, t.columns, view_name, start_hlc, diff))


def run_batch(spark, tables: list[TableBatch], batch_seq: int, start_hlc: str, diff: bool) -> list[dict]:
    """Emit every table's messages of one batch; returns one record per file written."""
    outputs, views = [], []
    for i, t in enumerate(tables):
        # Feeds run in threads sharing one session: a view name of this job's batch alone, dropped after.
        views.append(f"feedctl_changes_{t.emit.job_id}_{batch_seq}_{i}")
        msgs = messages(spark, t, views[-1], start_hlc, diff)
        pair = None if t.sql else (t.columns, t.key, diff)
        outputs.append(msgs.mapInArrow(partial(emit_partition, config=t.emit.to_dict(), pair=pair), RESULT_DDL))
    if not outputs:
        return []
    try:
        return reduce(lambda a, b: a.unionByName(b), outputs).toArrow().to_pylist()
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
