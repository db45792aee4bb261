"""The demo's feeds through a Spark Connect server of their own (pyspark's, a process started on 127.0.0.1):
an initial scan, a workload, a CDC query, a run killed with SIGKILL after its files were written and run
again, every feed verified, on a server that shares neither disk nor credentials with the client; a
`--follow` node through a session the server closed and a server killed and started again; a run in the
test's process with the classic API unusable; a local master in Spark 4's connect mode; executors that cannot
import feedctl, named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from feedctl.testing import connect_server
from support import copy_demo_project
from support.nodes import drain, wait_for
from support.projects import demo_on_s3, feedctl_process

LOCALITY = "region=us-east1"  # vehicles_in_use's execution_locality
FEEDS = ("movr_all", "vehicles_in_use", "ride_ends")
TOKEN_VARIABLE = "SPARK_CONNECT_TOKEN"


def spark_at(server: connect_server.ConnectServer, monkeypatch) -> dict:
    """project.yml's `spark:` for `server`, its token through env_var() (set for this process too: the
    workload and verify load the project)."""
    monkeypatch.setenv(TOKEN_VARIABLE, server.token)
    remote = f"sc://localhost:{server.port}/;token={{{{ env_var('{TOKEN_VARIABLE}') }}}}"
    return {"remote": remote, "conf": {"spark.sql.shuffle.partitions": "2"}}


def on_remote(root: Path, server: connect_server.ConnectServer, monkeypatch) -> None:
    """The demo project with Spark at `server`."""
    project = yaml.safe_load((root / "project.yml").read_text())
    project["spark"] = spark_at(server, monkeypatch)
    (root / "project.yml").write_text(yaml.safe_dump(project, sort_keys=False))


def feedctl(root: Path, server, *args: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    return feedctl_process(root, *args, kill_at=kill_at, env={TOKEN_VARIABLE: server.token if server else ""})


def verified(root: Path) -> None:
    """`verify` clean on the demo's three feeds, and messages from the plain feed and from a CDC query (a
    short workload may end no ride, so ride_ends may have none)."""
    from feedctl.verify.feed import verify_feed

    counts = {}
    for feed in FEEDS:
        report = verify_feed(root, feed)
        assert report.ok, "\n".join(report.lines())
        counts[feed] = report.messages
    assert counts["movr_all"] and counts["vehicles_in_use"], counts


def test_the_demo_through_a_server_that_shares_no_disk_loses_nothing_to_a_kill(s3, tmp_path, monkeypatch):
    """A server in a mount namespace where the test's folder is hidden, with no object-store settings: tables,
    staging and sinks on S3, the credentials in the client's environment alone, so what the tasks read and
    write with travels with the plan. `debug` reaches it; runs killed after cutting a batch and after writing
    its files, and run again, lose nothing."""
    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload
    from feedctl.sinks.cloudstorage import SinkFolder

    for bucket in ("warehouse", "stage", "sinks"):
        SinkFolder(f"s3://{bucket}", str(tmp_path)).fs.mkdir(bucket)
    with connect_server.start(hidden=[tmp_path]) as server:
        root = copy_demo_project(tmp_path / "demo")
        demo_on_s3(root, spark_at(server, monkeypatch))
        init(root, rows=30, seed=5)

        debug = feedctl(root, server, "debug")
        [line] = [line for line in debug.stdout.splitlines() if "spark remote" in line]
        assert line.startswith("OK") and "Spark 4.2.0" in line and "executors run feedctl" in line, line
        first = feedctl(root, server, "run", "--locality", LOCALITY)  # initial scans, read by the tasks
        assert first.returncode == 0, first.stdout + first.stderr
        run_workload(root, 1, 4, 6)
        killed = feedctl(root, server, "run", "--locality", LOCALITY, kill_at="after-emit")  # files, no checkpoint
        assert killed.returncode == -9, killed.stdout + killed.stderr
        run_workload(root, 1, 4, 16)
        cut = feedctl(root, server, "run", "--locality", LOCALITY, kill_at="after-intent")  # cut, not emitted
        assert cut.returncode == -9, cut.stdout + cut.stderr
        again = feedctl(root, server, "run", "--locality", LOCALITY)
        assert again.returncode == 0, again.stdout + again.stderr

    verified(root)
    written = [p for p in (root / "target").rglob("*") if p.is_file() and p.suffix in (".json", ".sql", ".html")]
    for path in written:  # the token came from env_var(): nowhere in target/, nor in what the commands printed
        assert server.token not in path.read_text(errors="replace"), path
    for done in (debug, first, killed, cut, again):
        assert server.token not in done.stdout + done.stderr


def test_a_run_under_spark_connect_never_touches_the_classic_api(tmp_path, monkeypatch):
    """The classic API made unusable in this process (no SparkContext, no JVM gateway): a run through the
    server emits and verifies all the same, so no code path of a run needs them."""
    import pyspark
    import pyspark.java_gateway
    from pyspark.core.context import SparkContext

    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload
    from feedctl.spark import session
    from support.e2e import run

    def unusable(*args, **kwargs):
        raise AssertionError("the classic API was used under Spark Connect")

    root = copy_demo_project(tmp_path / "demo")
    with connect_server.start() as server:
        on_remote(root, server, monkeypatch)
        init(root, rows=20, seed=6)
        monkeypatch.setattr(SparkContext, "__init__", unusable)
        monkeypatch.setattr(SparkContext, "_ensure_initialized", classmethod(unusable))
        monkeypatch.setattr(SparkContext, "getOrCreate", classmethod(unusable))
        monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", unusable)
        classic, session._session = session._session, None  # this worker's classic session, if it has one
        try:
            reports = run(root, locality=LOCALITY)
            run_workload(root, 1, 4, 7)
            reports = run(root, locality=LOCALITY)
            assert {r.status for r in reports.values()} == {"running"}, reports
            assert session.cores.is_connect(session._session)
        finally:
            if session._session is not None:
                session._session.stop()
            session._session = classic
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    verified(root)


@contextmanager
def following(root: Path, server, log: Path):
    """A `run --follow` node of movr_all through `server`, its output in `log`; SIGTERM at the end."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", TOKEN_VARIABLE: server.token}
    flags = ["--poll-interval", "0.5", "--testing-retry-backoff", "0.05"]
    with open(log, "w") as out:
        node = subprocess.Popen(
            [sys.executable, "-m", "feedctl.cli", "--project-dir", str(root), "run", "--follow", "-s", "movr_all"]
            + flags,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        yield node
    finally:
        drain(node)


def movr_all(root: Path) -> dict:
    from feedctl.commands.jobs import job_records

    return next((j for j in job_records(root) if j["feed"] == "movr_all"), {})


def high_water_past(root: Path, moment_ns: int) -> bool:
    return int((movr_all(root).get("high_water_timestamp") or "0").split(".")[0]) > moment_ns


def test_a_follow_node_outlives_a_closed_session_and_a_server_restart_losing_nothing(tmp_path, monkeypatch):
    """A `--follow` node through a server that closes sessions idle for 2 s. Idle longer, its next batch meets
    a closed session, an outage, and the retry runs on a new session: the job never pauses. Then the server is
    killed: an outage too, waited out with the job running, its running status saying in one line what it
    waits for and since when; the server back, the node delivers every change made meanwhile by itself."""
    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload
    from feedctl.verify.feed import verify_feed

    expiring = {
        "spark.connect.session.manager.defaultSessionTimeout": "2s",
        "spark.connect.session.manager.maintenanceInterval": "1s",
    }
    root = copy_demo_project(tmp_path / "demo")
    log = tmp_path / "node.log"
    with connect_server.start(conf=expiring) as server:
        on_remote(root, server, monkeypatch)
        init(root, rows=20, seed=8)
        with following(root, server, log):
            wait_for(lambda: movr_all(root).get("high_water_timestamp"), "the initial scan is emitted", 300)
            time.sleep(4)  # idle past the timeout and a maintenance pass: the server closes the session
            run_workload(root, 1, 4, 9)
            committed = time.time_ns()
            wait_for(lambda: high_water_past(root, committed), "the high-water mark passes the workload", 300)
            assert "no longer knows this session" in log.read_text()
            assert movr_all(root)["status"] == "running" and not movr_all(root)["error"]

            server.stop(signal.SIGKILL)
            run_workload(root, 1, 4, 10)
            committed = time.time_ns()
            waiting = wait_for(
                lambda: (j := movr_all(root))["running_status"].startswith("waiting since") and j,
                "the job says what it waits for",
                300,
            )
            assert waiting["status"] == "running" and not waiting["error"], waiting
            said = waiting["running_status"]
            assert "Spark Connect server sc://localhost" in said, said
            assert "\n" not in said and server.token not in said

            server.restart()
            wait_for(lambda: high_water_past(root, committed), "the high-water mark passes what came meanwhile", 300)
            back = movr_all(root)
            assert back["status"] == "running" and not back["running_status"].startswith("waiting"), back
            told = log.read_text().splitlines()
            # the feed's own lines: a state store busy under load is said apart, by the node
            away = [line for line in told if "movr_all: " in line and "retrying until it is back" in line]
            over = [line for line in told if "movr_all: " in line and "works again after" in line]
            # each outage said once and said over: the closed session after the idle wait, the server killed
            # last (a slow initial scan may meet the short timeout too: one more outage, said the same way)
            assert len(away) == len(over) >= 2, told[-40:]
            assert any("no longer knows this session" in line for line in away), away
            step = away[-1].split("movr_all: ")[1].split(" failed")[0]  # the step that met it, said over
            assert "Connection refused" in away[-1] and f"movr_all: {step} works again" in over[-1], (away, over)
    report = verify_feed(root, "movr_all")
    assert report.ok and report.messages > 0, "\n".join(report.lines()) + log.read_text()[-3000:]


def test_a_local_master_in_connect_mode_runs_the_demo(tmp_path):
    """`spark.api.mode: connect` with a local master: feedctl starts the server in its own JVM, on a free port
    behind a token of its own, and runs every batch through it."""
    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload

    root = copy_demo_project(tmp_path / "demo")
    project = yaml.safe_load((root / "project.yml").read_text())
    project["spark"] = {"master": "local[2]", "conf": {"spark.api.mode": "connect"}}
    (root / "project.yml").write_text(yaml.safe_dump(project, sort_keys=False))
    init(root, rows=20, seed=11)
    first = feedctl(root, None, "run", "--locality", LOCALITY)
    assert first.returncode == 0, first.stdout + first.stderr
    run_workload(root, 1, 4, 12)
    again = feedctl(root, None, "run", "--locality", LOCALITY)
    assert again.returncode == 0, again.stdout + again.stderr
    verified(root)


def test_executors_that_cannot_import_feedctl_are_named_by_debug_and_run(tmp_path, monkeypatch):
    """A server whose Python workers run an interpreter without feedctl (the library not installed on the
    cluster): `debug` and `run` say so, pointing at the manual, at once; the job is left as it is."""
    from feedctl.commands.jobs import job_records
    from feedctl.commands.workload import init

    bare = tmp_path / "bare"  # this Python, without the project's packages
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with connect_server.start(python=str(bare / "bin" / "python")) as server:
        root = copy_demo_project(tmp_path / "demo")
        on_remote(root, server, monkeypatch)
        init(root, rows=10, seed=13)
        debug = feedctl(root, server, "debug")
        assert debug.returncode == 1, debug.stdout + debug.stderr
        [line] = [line for line in debug.stdout.splitlines() if "spark remote" in line]
        assert "executors cannot run feedctl" in line and "docs/guides/spark-connect.md" in line, line
        ran = feedctl(root, server, "run", "-s", "movr_all")
        assert ran.returncode == 1
        assert "executors cannot run feedctl" in ran.stdout + ran.stderr, ran.stdout + ran.stderr
        assert ran.stdout.count("executors cannot run feedctl") == 1, "retried: no retry fixes it"
        [job] = [j for j in job_records(root) if j["feed"] == "movr_all"]
        assert job["status"] == "running" and job["high_water_timestamp"] is None, job
        assert server.token not in debug.stdout + ran.stdout + ran.stderr
