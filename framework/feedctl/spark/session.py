"""The one SparkSession of a process, configured from project.yml."""

from __future__ import annotations

import os
import re
import secrets
import socket
import sys
import warnings
from concurrent.futures import Future
from threading import Thread

import pyarrow as pa

import feedctl
from feedctl.diagnostics import first_line
from feedctl.errors import RunError
from feedctl.spark import cores, jvm_logs
from feedctl.spark.class_archive import with_archive
from feedctl.spark.place import SparkPlace, remote_address, remote_applies

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
# What a CDC query's results depend on: a server that refuses it cannot run the feed.
REQUIRED_CONF = ("spark.sql.session.timeZone",)
# pyspark's client warns once it gives up retrying; the error that follows says the same, once, in a line.
warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")

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


def spark_session(place: SparkPlace = SparkPlace(), quick: bool = False):
    """Get or start the process's Spark: a classic session on `place.master`, or a Spark Connect session with
    `place.remote` or with a server started here for a local master in connect mode. Workers run this
    interpreter, so they see the same packages. `quick`: the driver JVM with its quick compiler alone
    (`quick_compiler`)."""
    global _session
    if _session is not None:
        return _session
    if place.remote:
        reachable(place)
        session = connected(place.remote, place)
    elif place.connect:
        session = connected(_local_server(place, quick), place)
    else:
        session = _classic(place.master, place.classic_conf(), quick)
    if place.checks_executors:
        check_executors(session, place)
    _session = session
    return _session


def _classic(master: str, conf: dict[str, str], quick: bool):
    # The executors' Python: `spark.pyspark.python` (a shipped environment's), else this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python", sys.executable))
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
        **java_options(jvm_logs.with_log_level({**DEFAULT_CONF, **conf}), quick),
    }
    jvm_logs.launch_gateway(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _local_server(place: SparkPlace, quick: bool) -> str:
    """A local master in connect mode: Spark Connect's server started in this process's JVM (as pyspark's own
    connect mode does, but on a free port of 127.0.0.1 rather than 15002, so that several processes of one
    host each have theirs), behind a token of its own; returns the remote to reach it."""
    token = secrets.token_hex(16)
    conf = place.classic_conf()
    plugins = ",".join(filter(None, [conf.get("spark.plugins"), CONNECT_PLUGIN]))
    server = _classic(
        place.master,
        {
            **conf,
            "spark.plugins": plugins,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": "0",
            "spark.connect.authenticate.token": token,
        },
        quick,
    )
    service = getattr(getattr(server._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$"), "MODULE$")
    # pyspark's client sends a token without TLS only to a host named localhost (gRPC's local credentials).
    return f"sc://localhost:{service.localPort()}/;token={token}"


def connected(remote: str, place: SparkPlace):
    """A Spark Connect session with `remote`, holding feedctl's settings and the project's that a session
    takes. Its client gives up on a server that does not answer within seconds rather than its own ten
    minutes: an outage is feedctl's to retry and, when it lasts, to pause the job for."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    # As pyspark's own builder does for a connect session: its functions module then builds Spark Connect's
    # expressions rather than the classic API's.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = RemoteSession.builder.remote(remote).create()
    session.client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=2000)])
    wanted = {**{k: v for k, v in DEFAULT_CONF.items() if remote_applies(k)}, **place.session_conf()}
    for key, value in wanted.items():
        try:
            session.conf.set(key, value)
        except Exception as exc:
            away = outage(exc, place)
            if away:
                raise SparkUnavailable(away) from None
            if key in place.conf or key in REQUIRED_CONF:
                raise RunError(
                    f"the Spark Connect server {place.described()} refuses spark.conf {key}={value} "
                    f"({first_line(exc, 160)}); set it where the server starts, or remove it"
                ) from None
    return session


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
        problem = refused(host, int(port), timeout) if port.isdigit() else "not host:port"
        if not problem:
            return ""
        problems.append(f"{address}: {problem}")
    return f"cannot connect to the Spark master {master} ({'; '.join(problems)})"


def refused(host: str, port: int, timeout: float) -> str:
    """Why `host:port` does not accept a connection; '' when it does."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return str(exc.strerror or exc)


def outage(exc: BaseException, place: SparkPlace) -> str:
    """One line saying which part of Spark is away, when `exc` is an outage of the cluster or of the Spark
    Connect server; '' otherwise."""
    if isinstance(exc, SparkUnavailable):
        return str(exc)
    if place.connect:
        return _connect_outage(exc, place)
    text = str(exc)
    if not any(sign in text for sign in _OUTAGE):
        return ""
    master = place.master
    return master_unreachable(master) or f"the Spark application on {master} stopped ({first_line(exc, 160)})"


# gRPC's codes for a server away or a connection lost, and Spark Connect's for a session the server no longer
# knows (it restarted, or expired the session while the process stood idle).
_CONNECT_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED")
_LOST_SESSION = ("INVALID_HANDLE.SESSION_", "NO_ACTIVE_SESSION")


def _connect_outage(exc: BaseException, place: SparkPlace) -> str:
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    if not isinstance(exc, SparkConnectGrpcException):
        return ""
    where = place.described()
    if (exc.getCondition() or "").startswith(_LOST_SESSION) or any(s in str(exc) for s in _LOST_SESSION):
        return f"the Spark Connect server {where} no longer knows this session ({first_line(exc, 160)})"
    if exc.getGrpcStatusCode().name not in _CONNECT_CODES:
        return ""
    return remote_unreachable(place) or f"lost the connection to the Spark Connect server {where}"


def remote_unreachable(place: SparkPlace, timeout: float = 5.0) -> str:
    """Why the Spark Connect server of `place.remote` does not accept connections; '' when it does (or for a
    server this process started)."""
    if not place.remote:
        return ""
    problem = refused(*remote_address(place.remote), timeout)
    return problem and f"cannot connect to the Spark Connect server {place.described()} ({problem})"


def reachable(place: SparkPlace) -> None:
    """At once, rather than after the client's retries."""
    problem = remote_unreachable(place)
    if problem:
        raise SparkUnavailable(problem)


def discard() -> None:
    """Drop the process's session after an outage, so that the next call starts a new one."""
    global _session
    from pyspark import SparkContext

    cores.forget()
    for stoppable in (_session, SparkContext._active_spark_context):
        if stoppable is not None:
            try:
                stoppable.stop()
            except Exception:  # it is gone already
                pass
    _session = None


class ExecutorSetupError(RunError):
    """The executors cannot run this feedctl: no retry fixes that, and the job is left as it is for a node
    (or a server) that can."""


def _executor_side(batches):
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"version": feedctl.__version__}])


_IMPORT_ERROR = re.compile(r"(?:ModuleNotFoundError|ImportError): [^\n)]*")


def check_executors(spark, place: SparkPlace) -> None:
    """On a cluster or a Spark Connect server, the executors' Python must import the feedctl the driver runs
    (the same virtual environment on every host, one shipped with `spark.archives`, or a wheel installed as
    the cluster's library): checked once, with a task."""
    guide = "the manual: docs/guides/spark-connect.md" if place.remote else "the manual: docs/guides/spark-cluster.md"
    try:
        [row] = spark.range(0, 1, 1, 1).mapInArrow(_executor_side, "version string").toArrow().to_pylist()
    except Exception as exc:
        away = outage(exc, place)
        if away:
            raise SparkUnavailable(away) from None
        # The worker's import error, wherever Spark's report of the failed task holds it.
        missing = _IMPORT_ERROR.search(str(exc))
        raise ExecutorSetupError(
            f"the executors cannot run feedctl ({missing[0] if missing else first_line(exc)}); give them the "
            f"driver's virtual environment, or feedctl {feedctl.__version__} as a library ({guide})"
        ) from None
    if row["version"] != feedctl.__version__:
        raise ExecutorSetupError(
            f"the executors import feedctl {row['version']}, the driver runs {feedctl.__version__}; "
            f"give them the same version ({guide})"
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
