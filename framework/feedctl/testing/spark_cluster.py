"""A Spark standalone cluster on 127.0.0.1 for tests: a master and workers as separate processes, each
worker in a mount namespace of its own where the given folders (the project) are hidden under an empty
tmpfs, so that it shares no disk with the driver, as a worker on another host would. Needs `unshare` and
root (tests and CI run as root). Each process is stopped by its own process id.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from feedctl.testing.devservers import HOST, Server, free_port, wait_for_port


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def server_env() -> dict[str, str]:
    """The environment of a cluster's own process: no object-store settings, since what executors need comes
    from the driver (or the Spark Connect client) with the work."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "AZURE_", "STORAGE_"))}
    return {**keep, "SPARK_LOCAL_IP": HOST, "SPARK_NO_DAEMONIZE": "1"}


def hiding(hidden: list[Path], command: str) -> list[str]:
    """`command` (a shell command that execs the server) in a mount namespace of its own where each of
    `hidden` is an empty tmpfs; unshare and sh exec into it, so the process id is the server's."""
    mounts = " && ".join(f"mount -t tmpfs tmpfs {shlex.quote(str(p))}" for p in hidden)
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mounts} && exec {command}"]


@dataclass
class Cluster:
    master: Server
    ui_port: int
    workers: list[Server] = field(default_factory=list)
    folder: Path | None = None

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master.port}"

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as response:
                return int(json.load(response).get("aliveworkers", 0))
        # A master just started serves its UI before the page, or the page empty: no worker yet.
        except (urllib.error.HTTPError, ValueError):
            return 0

    def add_worker(self, hidden: list[Path], cores: int = 1, memory: str = "1g") -> Server:
        work = Path(tempfile.mkdtemp(prefix="worker-", dir=self.folder))
        port = free_port()
        command = (
            f"{shlex.quote(_spark_class())} org.apache.spark.deploy.worker.Worker "
            f"--host {HOST} --port {port} --webui-port {free_port()} --cores {cores} --memory {memory} "
            f"--work-dir {shlex.quote(str(work))} {self.url}"
        )
        process = subprocess.Popen(
            hiding(hidden, command),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=server_env(),
        )
        worker = Server("spark-worker", port, process)
        self.workers.append(worker)
        wait_for_port(port, process, timeout=120)
        deadline = time.monotonic() + 120
        while self.alive_workers() < len(self.workers):
            if time.monotonic() > deadline:
                raise TimeoutError("a worker did not register with the master")
            time.sleep(0.5)
        return worker

    def restart_master(self) -> None:
        """A master again where the stopped one was; the workers register with it again by themselves."""
        self.master.stop()
        self.master = start_master(self.master.port, self.ui_port, self.folder).master
        deadline = time.monotonic() + 180
        while self.alive_workers() < len(self.workers):
            if time.monotonic() > deadline:
                raise TimeoutError("the workers did not register with the restarted master")
            time.sleep(1)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.master.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def start_master(port: int | None = None, ui_port: int | None = None, folder: Path | None = None) -> Cluster:
    """A master; `port` and `ui_port` to bring one back where it was."""
    port, ui_port = port or free_port(), ui_port or free_port()
    process = subprocess.Popen(
        [
            _spark_class(),
            "org.apache.spark.deploy.master.Master",
            "--host",
            HOST,
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=server_env(),
    )
    master = Server("spark-master", port, process)
    try:
        wait_for_port(port, process, timeout=120)
        wait_for_port(ui_port, process, timeout=120)
    except Exception:
        master.stop()
        raise
    return Cluster(master, ui_port, folder=folder or Path(tempfile.mkdtemp(prefix="feedctl-spark-cluster-")))
