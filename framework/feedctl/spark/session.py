"""The one SparkSession of a process, configured from project.yml."""

from __future__ import annotations

import os
import socket
import sys
from concurrent.futures import Future
from threading import Thread

import feedctl
from feedctl.diagnostics import first_line
from feedctl.spark import jvm_logs
from feedctl.spark.class_archive import with_archive

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
    "spark.python.daemon.module": "feedctl.spark.worker_daemon",
}


# The driver JVM's quick compiler alone (C1, no C2). Without a CDC query the driver only schedules a task per
# span (per core at most) and carries a few result rows: C2 spends more CPU than it saves. A CDC query's rows
# pass through Spark SQL's generated code, which C2 speeds up in a long catch-up; a --follow node, though,
# lives on small batches, where C2 compiles Spark's planning code for minutes and never pays it back.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def quick_compiler(queries: bool, follow: bool) -> bool:
    """Whether the driver JVM runs with its quick compiler alone: on a --follow node, or when no feed of the
    process runs a CDC query."""
    return follow or not queries


def java_options(conf: dict[str, str], quick: bool) -> dict[str, str]:
    """`conf` with the class archive and, if `quick`, the quick compiler alone. The project's own options come
    last, so they win."""
    conf = with_archive(conf)
    if not quick:
        return conf
    return {
        **conf,
        "spark.driver.extraJavaOptions": f"{QUICK_JIT} {conf.get('spark.driver.extraJavaOptions', '')}".strip(),
    }


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None, quick: bool = False):
    """Get or start Spark. Workers run this interpreter, so they see the same packages. `quick`: the driver
    JVM with its quick compiler alone (`quick_compiler`)."""
    global _session
    if _session is not None:
        return _session
    # The executors' Python: `spark.pyspark.python` (a shipped environment's), else this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", (conf or {}).get("spark.pyspark.python", sys.executable))
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    unreachable = master_unreachable(master)
    if unreachable:  # at once, rather than after Spark's own minute of registration attempts
        raise SparkUnavailable(unreachable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": master,
        "spark.app.name": "feedctl",
        **java_options(jvm_logs.with_log_level({**DEFAULT_CONF, **(conf or {})}), quick),
    }
    jvm_logs.launch_gateway(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if not master.startswith("local"):
        check_executors(session)
    _session = session
    return _session


class SparkUnavailable(RuntimeError):
    """Spark cannot take work now: its master does not answer, or the application stopped."""


# What Spark says when the cluster, not the work, failed: an outage to wait out, not a reason to fail the job.
_OUTAGE = (
    "stopped SparkContext",
    "SparkContext was shut down",
    "SparkContext has been shutdown",
    "All masters are unresponsive",
    "ExecutorLostFailure",
)


def master_unreachable(master: str, timeout: float = 5.0) -> str:
    """Why a standalone master (`spark://host:port[,host:port]`) does not accept connections; '' when one of
    its addresses does, or for any other master."""
    if not master.startswith("spark://"):
        return ""
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return ""
        except OSError as exc:
            problems.append(f"{address}: {exc.strerror or exc}")
        except ValueError:
            problems.append(f"{address}: not host:port")
    return f"cannot connect to the Spark master {master} ({'; '.join(problems)})"


def outage(exc: BaseException, master: str) -> str:
    """One line saying which part of Spark is away, when `exc` is an outage of the cluster; '' otherwise."""
    if isinstance(exc, SparkUnavailable):
        return str(exc)
    text = str(exc)
    if not any(sign in text for sign in _OUTAGE):
        return ""
    return master_unreachable(master) or f"the Spark application on {master} stopped ({first_line(exc, 160)})"


def discard() -> None:
    """Drop the process's session after an outage, so that the next call starts a new one."""
    global _session
    from pyspark import SparkContext

    for stoppable in (_session, SparkContext._active_spark_context):
        if stoppable is not None:
            try:
                stoppable.stop()
            except Exception:  # it is gone already
                pass
    _session = None


class ExecutorSetupError(RuntimeError):
    """The executors cannot run this feedctl."""


def _executor_side() -> str:
    return feedctl.__version__


def check_executors(spark) -> None:
    """On a cluster, the executors' Python must import the feedctl the driver runs (the same virtual
    environment on every host, or one shipped with `spark.archives`): checked once, with a task."""
    try:
        [version] = spark.sparkContext.parallelize([0], 1).map(lambda _: _executor_side()).collect()
    except Exception as exc:
        raise ExecutorSetupError(
            f"the executors cannot run feedctl ({first_line(exc)}); give them the driver's "
            "virtual environment (README: Running on a cluster)"
        ) from None
    if version != feedctl.__version__:
        raise ExecutorSetupError(
            f"the executors import feedctl {version}, the driver runs {feedctl.__version__}; "
            "give every host the same virtual environment (README: Running on a cluster)"
        )


class Starting:
    """A handle on the process's session, which starts in the background on first need (the JVM starts while
    the first batch is staged); a start that failed, or a session dropped after an outage (`restart`), is
    started again by the next `get`."""

    def __init__(self, factory):
        self.factory = factory
        self._future: Future | None = None

    def get(self):
        future = self._future
        if future is None or (future.done() and future.exception() is not None):
            future = self._future = in_background(self.factory)
        return future.result

    def restart(self) -> None:
        self._future = None
        discard()


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
