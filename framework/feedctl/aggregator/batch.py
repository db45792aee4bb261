"""One batch in Spark: a task per span reads the span's staged changes, orders them by (event timestamp,
key), pairs each commit's before and after images of a key into one change and writes the span's files.

The coordinator stages each table's changes already split by span, so no row crosses the JVM to be
shuffled or sorted: Spark schedules one task per span (a partition each, holding the span's number), and
a span's files have exactly one writer. A feed with a CDC query hands the paired changes to Spark, which runs
the query over them (a filter and a projection keep each task's order), and writes what it selects. An
initial scan stages nothing: each task reads its share of the snapshot itself (`snapshot_scan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial, reduce

import pyarrow as pa

from feedctl.aggregator import pairing, query
from feedctl.aggregator.emit import RESULT_DDL, EmitConfig, emit_partition, emit_spans
from feedctl.aggregator.snapshot_scan import SnapshotScan
from feedctl.diagnostics import first_line
from feedctl.source.delta import SourceError


@dataclass(frozen=True)
class TableBatch:
    table: str  # source.table
    changes: str | SnapshotScan  # folder of staged Parquet changes, a file per span; or a scan's snapshot
    schema: pa.Schema  # of the rows a task reads
    columns: list[str]  # the table's columns, in order
    key: list[str]
    spans: int
    sql: str | None  # the feed's compiled CDC query, if any
    emit: EmitConfig


def span_tasks(spark, t: TableBatch):
    """One partition per span, holding the span's number."""
    return spark.range(0, t.spans, 1, t.spans)


def messages(spark, t: TableBatch, view_name: str, start_hlc: str, diff: bool):
    """A feed with a CDC query: the query over the paired changes of each span, one partition per span,
    in emission order."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = pairing.view_schema(t.schema, t.columns, t.key)
    view = span_tasks(spark, t).mapInArrow(
        partial(pairing.view_partition, changes=t.changes, columns=t.columns, key=t.key, schema=schema),
        from_arrow_schema(schema, prefer_timestamp_ntz=True))
    view.createOrReplaceTempView(view_name)
    return spark.sql(query.spark_sql(t.sql, t.table, t.columns, view_name, start_hlc, diff))


def run_batch(spark, tables: list[TableBatch], batch_seq: int, start_hlc: str, diff: bool) -> list[dict]:
    """Emit every table's messages of one batch; returns one record per file written."""
    try:
        return _plain(spark, [t for t in tables if t.sql is None], diff) + \
            _queried(spark, [t for t in tables if t.sql is not None], batch_seq, start_hlc, diff)
    except Exception as exc:
        # A scan's task reads the table itself: what it cannot read is the same SourceError, which no retry fixes.
        raised = first_line(exc)
        if raised.startswith("SourceError: "):
            raise SourceError(raised.removeprefix("SourceError: ")) from None
        raise


def _plain(spark, tables: list[TableBatch], diff: bool) -> list[dict]:
    """Tables without a CDC query, as one job of Spark's core API: a task per span, handed its number. No
    query plan to make, which spares the first batch of a run a second or more of the JVM's start-up."""
    if not tables:
        return []
    context = spark.sparkContext
    jobs = [context.parallelize(range(t.spans), t.spans).mapPartitions(
        partial(emit_spans, config=t.emit.to_dict(), changes=t.changes, columns=t.columns, key=t.key, diff=diff))
        for t in tables]
    return context.union(jobs).collect()


def _queried(spark, tables: list[TableBatch], batch_seq: int, start_hlc: str, diff: bool) -> list[dict]:
    """Tables with a CDC query: Spark SQL runs it over each span's paired changes."""
    outputs, views = [], []
    try:
        for i, t in enumerate(tables):
            # Feeds run in threads sharing one session: a view name of this job's batch alone, dropped after.
            views.append(f"feedctl_changes_{t.emit.job_id}_{batch_seq}_{i}")
            selected = messages(spark, t, views[-1], start_hlc, diff)
            outputs.append(selected.mapInArrow(partial(emit_partition, config=t.emit.to_dict()), RESULT_DDL))
        return reduce(lambda a, b: a.unionByName(b), outputs).toArrow().to_pylist() if outputs else []
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
