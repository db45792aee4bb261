"""The demo's feeds on a Spark standalone cluster whose two workers share no disk with the driver (each in a
mount namespace with the test's folder hidden): tables, staging and sinks on S3 (moto), credentials only in
the driver's environment. A runner killed with SIGKILL mid-batch is restarted; every feed verifies clean."""

from __future__ import annotations

import pytest

from feedctl.sinks.cloudstorage import SinkFolder
from feedctl.testing.spark_cluster import start_master
from support import copy_demo_project
from support.projects import demo_on_s3
from support.projects import feedctl_process as feedctl

LOCALITY = "region=us-east1"  # vehicles_in_use's execution_locality


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """The folder the workers do not see: every test's files are under it."""
    return tmp_path_factory.mktemp("hidden")


@pytest.fixture(scope="module")
def cluster(hidden):
    """One master and two workers for the module's tests (the last one stops and restarts the master)."""
    started = start_master()
    try:
        for _ in range(2):
            started.add_worker(hidden=[hidden])
        yield started
    finally:
        started.stop()


@pytest.fixture
def work(hidden, request):
    path = hidden / request.node.name
    path.mkdir()
    return path


def on_s3(root, master: str, staging: str = "s3://stage/feedctl", conf: dict | None = None) -> None:
    """The demo project with its tables, staging and sinks on S3 and Spark on `master`."""
    spark_conf = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.executor.memory": "768m"}
    demo_on_s3(root, {"master": master, "conf": {**spark_conf, **(conf or {})}}, staging)


def test_the_demo_on_a_cluster_without_shared_disk_verifies(s3, cluster, work):
    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload
    from feedctl.verify.feed import verify_feed

    for bucket in ("warehouse", "stage", "sinks"):
        SinkFolder(f"s3://{bucket}", str(work)).fs.mkdir(bucket)
    root = copy_demo_project(work / "demo")
    on_s3(root, cluster.url)
    init(root, rows=30, seed=3)

    first = feedctl(root, "run", "--locality", LOCALITY)  # initial scans, read by the executors from S3
    assert first.returncode == 0, first.stdout + first.stderr
    run_workload(root, 4, 4, 5)
    killed = feedctl(root, "run", "--locality", LOCALITY, kill_at="after-emit")  # files written, no checkpoint
    assert killed.returncode == -9, killed.stdout + killed.stderr
    again = feedctl(root, "run", "--locality", LOCALITY)
    assert again.returncode == 0, again.stdout + again.stderr

    for feed in ("movr_all", "vehicles_in_use", "ride_ends"):
        report = verify_feed(root, feed)
        assert report.ok, "\n".join(report.lines())
        assert report.messages > 0, feed
    staged = [p for p in SinkFolder("s3://stage", str(work)).fs.find("stage") if p.endswith(".parquet")]
    assert staged == [], "a checkpointed batch's staging stayed"


def test_staging_the_executors_cannot_reach_fails_the_run_and_moves_nothing(s3, cluster, work):
    """A staging folder declared shared (`file://`) that the workers do not see: compile cannot tell, and the
    tasks find no staged file. The batch fails, is retried, and the job fails with the cause; the high-water
    mark stays where the initial scan left it, and the sink holds no message of the lost batch."""
    from feedctl.commands.jobs import job_records
    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload

    for bucket in ("warehouse", "sinks"):
        SinkFolder(f"s3://{bucket}", str(work)).fs.mkdir(bucket)
    root = copy_demo_project(work / "demo")
    # Spark's own four attempts of a failed task would only repeat what feedctl's retries of the batch show.
    on_s3(root, cluster.url, staging=f"file://{root}/target/stage", conf={"spark.task.maxFailures": "1"})
    assert feedctl(root, "compile").returncode == 0
    init(root, rows=20, seed=4)
    assert feedctl(root, "run", "--locality", LOCALITY).returncode == 0  # a scan stages nothing
    before = {j["feed"]: j for j in job_records(root)}
    files = SinkFolder("s3://sinks/warehouse_files", str(work)).list()
    run_workload(root, 2, 4, 6)

    failed = feedctl(root, "run", "-s", "movr_all")
    assert failed.returncode == 1
    [job] = [j for j in job_records(root) if j["feed"] == "movr_all"]
    assert job["status"] == "failed" and "staged changes cannot be read" in job["error"], job
    assert job["high_water_timestamp"] == before["movr_all"]["high_water_timestamp"]
    assert SinkFolder("s3://sinks/warehouse_files", str(work)).list() == files


def test_a_master_that_goes_away_pauses_the_job_and_resume_delivers_everything(s3, cluster, work):
    """An outage of Spark is retried, then pauses the job with its cause in one line (never a failed job
    that resume refuses); once the master is back, resume and a run deliver every change."""
    from feedctl.commands.jobs import job_records
    from feedctl.commands.workload import init
    from feedctl.commands.workload import run as run_workload
    from feedctl.verify.feed import verify_feed

    for bucket in ("warehouse", "stage", "sinks"):
        SinkFolder(f"s3://{bucket}", str(work)).fs.mkdir(bucket)
    root = copy_demo_project(work / "demo")
    on_s3(root, cluster.url)
    init(root, rows=20, seed=7)
    assert feedctl(root, "run", "-s", "movr_all").returncode == 0
    [before] = [j for j in job_records(root) if j["feed"] == "movr_all"]

    cluster.master.stop()
    run_workload(root, 2, 4, 8)
    down = feedctl(root, "run", "-s", "movr_all")
    assert down.returncode == 1, down.stdout + down.stderr
    [paused] = [j for j in job_records(root) if j["feed"] == "movr_all"]
    assert paused["status"] == "paused", paused
    assert cluster.url in paused["error"] and "refused" in paused["error"].lower(), paused["error"]
    assert "\n" not in paused["error"] and "Py4J" not in paused["error"]
    assert paused["high_water_timestamp"] == before["high_water_timestamp"]

    cluster.restart_master()
    assert feedctl(root, "resume", "movr_all").returncode == 0
    again = feedctl(root, "run", "-s", "movr_all")
    assert again.returncode == 0, again.stdout + again.stderr
    report = verify_feed(root, "movr_all")
    assert report.ok, "\n".join(report.lines())
