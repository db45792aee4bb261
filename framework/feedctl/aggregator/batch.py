"""One batch in Spark: the staged changes of each table → change view → CDC query → ordered spans → files.

The change view pairs a commit's before and after images by key: a key with both is an update, only an
after image an insert, only a before image a delete. A primary-key change therefore becomes a delete of the
old key and an insert of the new one, and if a key changes twice within one commit only the last change
counts; a delete and an insert of an identical row in one commit (a file rewritten without change data) is
no change at all (tables with map columns, which Spark cannot compare, keep such pairs). Rows are hash-partitioned by span once, before the pairing, and stay there through the query and
the sort, so that one task writes each span's files in (event timestamp, key) order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial, reduce

from feedctl.aggregator import query
from feedctl.aggregator.emit import RESULT_DDL, EmitConfig, emit_partition
from feedctl.compiler.cdc_query import PREV
from feedctl.encoding import frame

AFTER_TYPES = ("insert", "update_postimage")


@dataclass(frozen=True)
class TableBatch:
    table: str  # source.table
    staged: str  # folder of staged Parquet changes
    columns: list[str]  # the table's columns, in order
    key: list[str]
    spans: int
    sql: str | None  # the feed's compiled CDC query, if any
    emit: EmitConfig


def change_view(spark, t: TableBatch):
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    df = spark.read.parquet(t.staged)
    df = df.withColumn(frame.SPAN, F.pmod(F.hash(*[F.col(k) for k in t.key]), F.lit(t.spans)).cast("int"))
    df = df.repartition(t.spans, frame.SPAN)
    row = F.struct(*[F.col(c) for c in t.columns])
    after = F.col("_change_type").isin(*AFTER_TYPES)
    # Delta enforces no primary key, so one commit may hold two rows of a key: take the greatest, not
    # whichever arrives first, so a re-run picks the same one (maps cannot be compared: first() there).
    orderable = not any(isinstance(f.dataType, MapType) or "map<" in f.dataType.simpleString()
                        for f in df.schema.fields if f.name in t.columns)
    pick = (lambda c: F.max(c)) if orderable else (lambda c: F.first(c, ignorenulls=True))
    paired = df.groupBy(frame.SPAN, *t.key, "_commit_version").agg(
        pick(F.when(after, row)).alias("__after_row"),
        pick(F.when(~after, row)).alias(PREV),
        F.first(frame.TS_WALL).alias(frame.TS_WALL),
        F.first(frame.TS_LOGICAL).alias(frame.TS_LOGICAL),
        F.first(frame.MVCC_WALL).alias(frame.MVCC_WALL),
        F.max(F.col("_change_type").startswith("update_").cast("int")).alias("__from_update"),
    )
    if orderable:
        # A commit that rewrote a file without writing change data (delta-rs does so for an UPDATE that
        # changes nothing) reads as a delete and an insert of every row in the file: the same row before
        # and after is no change, and is not emitted.
        paired = paired.where(~((F.col("__from_update") == 0) & F.col("__after_row").eqNullSafe(F.col(PREV))))
    # A delete shows only its key; every other column is null, as in CockroachDB's CDC queries.
    columns = [F.col(c) if c in t.key else F.col(f"__after_row.{c}").alias(c) for c in t.columns]
    op = (F.when(F.col("__after_row").isNull(), F.lit("delete"))
          .when(F.col(PREV).isNull(), F.lit("insert")).otherwise(F.lit("update")))
    return paired.select(*columns, F.col(PREV), F.struct(*[F.col(k) for k in t.key]).alias(frame.KEY),
                         frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, frame.MVCC_WALL, op.alias(frame.OP))


def messages(spark, t: TableBatch, view_name: str, start_hlc: str, diff: bool):
    """The feed's messages for one table, partitioned by span and sorted for emission."""
    change_view(spark, t).createOrReplaceTempView(view_name)
    out = spark.sql(query.spark_sql(t.sql, t.table, t.columns, view_name, start_hlc, diff))
    return out.sortWithinPartitions(frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, frame.KEY)


def run_batch(spark, tables: list[TableBatch], batch_seq: int, start_hlc: str, diff: bool) -> list[dict]:
    """Emit every table's messages of one batch; returns one record per file written."""
    outputs, views = [], []
    for i, t in enumerate(tables):
        # Feeds run in threads sharing one session: a view name of this job's batch alone, dropped after.
        views.append(f"feedctl_changes_{t.emit.job_id}_{batch_seq}_{i}")
        msgs = messages(spark, t, views[-1], start_hlc, diff)
        outputs.append(msgs.mapInArrow(partial(emit_partition, config=t.emit.to_dict()), RESULT_DDL))
    if not outputs:
        return []
    try:
        return reduce(lambda a, b: a.unionByName(b), outputs).toArrow().to_pylist()
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
