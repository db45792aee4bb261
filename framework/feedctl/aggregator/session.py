"""The one SparkSession of a process, configured from project.yml."""

from __future__ import annotations

import os
import sys
from concurrent.futures import Future
from threading import Thread

_session = None

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
    "spark.python.daemon.module": "feedctl.aggregator.worker_daemon",
}


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None):
    """Get or start Spark. Workers run this interpreter, so they see the same packages."""
    global _session
    if _session is not None:
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from feedctl.aggregator.class_archive import with_archive

    builder = SparkSession.builder.master(master).appName("feedctl")
    for key, value in with_archive({**DEFAULT_CONF, **(conf or {})}).items():
        builder = builder.config(key, value)
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    return _session



def in_background(factory) -> Future:
    """`factory()` (a session) run in a thread of its own, so that the JVM starts while the caller goes on;
    its error, if any, goes to whoever waits on the result."""
    future: Future = Future()

    def start() -> None:
        try:
            future.set_result(factory())
        except BaseException as exc:
            future.set_exception(exc)

    Thread(target=start, name="spark-start", daemon=True).start()
    return future
