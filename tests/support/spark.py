"""The Spark settings of the tests, and the package's module that holds the process's one SparkSession."""

from __future__ import annotations

# What every test project runs with (support.e2e.write_project) and what the session fixture starts.
SPARK = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4"}}


def session_module():
    """The package's module of `spark_session()`, which caches the session in its global `_session`."""
    from feedctl.spark import session  # the one place that names it (to be feedctl.spark.session)

    return session
