"""A Spark Connect server on 127.0.0.1 for tests and benchmarks: pyspark's own
(`org.apache.spark.sql.connect.service.SparkConnectServer`, in its jars), a process of its own started through
`spark-submit` and stopped by its process id.

Its Python workers run this interpreter (`PYSPARK_PYTHON`), whose environment holds feedctl, as the
environment library of a Databricks cluster or serverless job would. It gets no object-store settings from
the environment, and may be started in a mount namespace where the given folders are hidden: it then shares
neither credentials nor disk with the client, as a server on another host would.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from feedctl.testing.devservers import HOST, free_port, wait_for_port
from feedctl.testing.spark_cluster import hiding, server_env

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


@dataclass
class ConnectServer:
    port: int
    token: str
    master: str
    conf: dict[str, str]
    python: str = sys.executable  # what its Python workers run
    hidden: tuple[Path, ...] = ()  # folders it does not see
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The remote as a project names it, token included. `localhost`, not the address: pyspark's client sends
        a token without TLS only to a host of that name (through gRPC's local credentials)."""
        return f"sc://localhost:{self.port}/;token={self.token}"

    def start(self, timeout: float = 180.0) -> "ConnectServer":
        conf = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.authenticate.token": self.token,
            "spark.ui.enabled": "false",
            "spark.python.daemon.module": "feedctl.spark.worker_daemon",
            **self.conf,
        }
        argv = [_spark_submit(), "--class", SERVER_CLASS, "--master", self.master, "--name", "feedctl-connect"]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        env = {**server_env(), "PYSPARK_PYTHON": self.python}
        env.pop("SPARK_REMOTE", None)
        argv.append("spark-internal")
        # spark-submit execs the JVM: the process id is the server's.
        self.process = subprocess.Popen(
            hiding(list(self.hidden), shlex.join(argv)) if self.hidden else argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        try:
            wait_for_port(self.port, self.process, timeout=timeout)
        except Exception:
            self.stop()
            raise
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, sig)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def restart(self) -> None:
        """The server again on the same port and token, as after an outage: sessions held before are gone."""
        self.stop()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the port is free once the old JVM let go of it
            try:
                self.start()
                return
            except RuntimeError:
                time.sleep(0.5)
        self.start()

    def __enter__(self) -> "ConnectServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(
    master: str = "local[2]", conf: dict[str, str] | None = None, python: str = sys.executable, hidden=()
) -> ConnectServer:
    return ConnectServer(free_port(), secrets.token_hex(16), master, dict(conf or {}), python, tuple(hidden)).start()
