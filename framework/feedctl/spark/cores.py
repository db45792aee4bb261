"""How many cores Spark has for a job: what sizes a batch's tasks (`tasks.batch.tasks`)."""

from __future__ import annotations

_known: dict[str, int] = {}  # Spark Connect session id -> cores


def is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def of(spark) -> int:
    """A classic session asks its SparkContext. A Spark Connect session has none to ask: a job of nothing but
    generated numbers tells how many partitions a range gets by default (Spark's default parallelism), once
    per session."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    if spark.session_id not in _known:
        parts = spark.range(0, 1 << 16).selectExpr("spark_partition_id() AS p").groupBy().max("p").first()[0]
        _known[spark.session_id] = int(parts) + 1
    return _known[spark.session_id]


def forget() -> None:
    """After an outage: the next session may have other cores."""
    _known.clear()
