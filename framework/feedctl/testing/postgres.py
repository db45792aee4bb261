"""A private PostgreSQL server on 127.0.0.1 for tests: Debian's server binaries (installed by `make install`
where missing), a cluster made by initdb in a temporary folder, run as the `postgres` user (the server
refuses root), and stopped by its own process id (SIGINT, a fast shutdown)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from feedctl.testing.devservers import HOST, Server, free_port, wait_for_port


def bindir() -> Path:
    """The newest installed server's binaries."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[4]))
    if not found:
        raise FileNotFoundError("no PostgreSQL server in /usr/lib/postgresql: `make install` installs Debian's")
    return Path(found[-1]).parent


def _as_postgres() -> dict:
    """Popen arguments that run a command as `postgres` when this process is root."""
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam("postgres")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


class Postgres(Server):
    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@{HOST}:{self.port}/postgres"

    def restart(self, stop_signal: int = signal.SIGINT, away: float = 0.0) -> None:
        """Stopped by `stop_signal` (SIGKILL: a crash, its sessions cut) and, `away` seconds later, started again
        on the same port and data: its sessions are gone, its rows are not."""
        if self.process.poll() is None:
            os.kill(self.process.pid, stop_signal)
            self.process.wait()
        time.sleep(away)
        self.process = _serve(self.folder, self.port)


def postgres(port: int | None = None) -> Postgres:
    port = port or free_port()
    folder = Path(tempfile.mkdtemp(prefix="feedctl-postgres-"))
    as_postgres = _as_postgres()
    if as_postgres:
        os.chown(folder, as_postgres["user"], as_postgres["group"])
    subprocess.run(
        [str(bindir() / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres", "--no-sync"],
        check=True,
        capture_output=True,
        **as_postgres,
    )
    try:
        process = _serve(folder, port)
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    # SIGINT: a fast shutdown, the postmaster stopping its children
    server = Postgres("postgres", port, process, folder, stop_signal=signal.SIGINT)
    server.env = {"FEEDCTL_TEST_STATE_URL": server.url}
    return server


def _serve(folder: Path, port: int) -> subprocess.Popen:
    """The postmaster of the cluster in `folder`, on `port`, once it accepts sessions."""
    with open(folder / "server.log", "ab") as log:  # the server keeps its own descriptor
        process = subprocess.Popen(
            [
                str(bindir() / "postgres"),
                "-D",
                str(folder / "data"),
                "-c",
                f"listen_addresses={HOST}",
                "-p",
                str(port),
                "-c",
                f"unix_socket_directories={folder}",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            stdin=subprocess.DEVNULL,
            **_as_postgres(),
        )
    try:
        wait_for_port(port, process)
        _wait_accepting(port, process)
    except Exception:
        process.kill()
        process.wait()
        raise
    return process


def _wait_accepting(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until the server accepts a session: it listens before its startup is over, and refuses sessions meanwhile
    ("the database system is starting up")."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited with code {process.returncode} while starting up")
        try:
            with psycopg.connect(host=HOST, port=port, user="postgres", dbname="postgres", connect_timeout=5):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
