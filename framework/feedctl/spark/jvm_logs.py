"""Spark's JVM held to feedctl's level: a log4j2 configuration for the driver and the executors, and the
driver JVM's stderr read through a filter that drops the JVM's own start-up notice.

Without them, every run prints Spark's default-profile banner, its log-level advice, a warning about the
native Hadoop library and the JVM's incubator-module notice before feedctl says anything. `feedctl --debug`
(or FEEDCTL_SPARK_LOG_LEVEL=warn, or info) lets them through.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

CONFIGURATION = Path(__file__).with_name("log4j2.properties")
LEVEL_VARIABLE = "FEEDCTL_SPARK_LOG_LEVEL"
# Printed straight to stderr, past any logging configuration: by the JVM, and by Spark as a shell starts.
_NOTICES = (
    b"WARNING: Using incubator modules",
    b"Setting default log level to ",
    b"To adjust logging level use sc.setLogLevel",
)


def level() -> str:
    return os.environ.get(LEVEL_VARIABLE, "error").lower()


def with_log_level(conf: dict[str, str]) -> dict[str, str]:
    """`conf` with the configuration and level on the driver's and the executors' Java options, before the
    project's own (which win)."""
    where = f"file:{CONFIGURATION}"
    if " " in where:  # Spark splits Java options at spaces outside quotes
        where = f'"{where}"'
    ours = f"-Dlog4j2.configurationFile={where} -Dfeedctl.spark.level={level()}"
    out = dict(conf)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        if "log4j2.configurationFile" not in out.get(key, ""):
            out[key] = f"{ours} {out.get(key, '')}".strip()
    return out


def launch_gateway(conf: dict[str, str]) -> None:
    """Start the driver JVM with `conf`, its stderr passed on to ours without the JVM's notices, unless the
    process already has one (a later session reuses it). The pipe is read from before the JVM starts: what a
    JVM that fails to start says reaches the user, and a chatty start never fills the pipe."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway as launch

    with SparkContext._lock:  # feeds' threads start the session at once: one JVM for all of them
        if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
            return
        read, write = os.pipe()
        threading.Thread(
            target=_pass_on, args=(os.fdopen(read, "rb"), level() != "error"), name="spark-stderr", daemon=True
        ).start()
        try:
            gateway = launch(SparkConf(loadDefaults=False).setAll(conf.items()), popen_kwargs={"stderr": write})
        finally:
            os.close(write)  # the JVM holds its own end; the reader sees EOF when it exits
        SparkContext._ensure_initialized(gateway=gateway)


def _pass_on(stream, everything: bool) -> None:
    """To file descriptor 2, where the JVM would have written, as long as it writes: this thread dying would
    leave the JVM blocked on a full pipe."""
    for line in iter(stream.readline, b""):
        if everything or not line.startswith(_NOTICES):
            try:
                os.write(2, line)
            except OSError:
                pass
