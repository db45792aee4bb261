"""Feeds into real object stores on 127.0.0.1 — S3 (moto), GCS (fake-gcs-server), Azure Blob (Azurite) —
checked by `feedctl verify` as on local disk; credentials from env_var() and the clouds' own variables,
never printed; a store that goes away pauses the job without losing anything.
"""

from __future__ import annotations

import json

import pytest

from feedctl.sinks.cloudstorage import SinkFolder
from feedctl.testing import devservers
from support import Cli
from support.e2e import Table, assert_verified, job_of, run, write_project

COLUMNS = {"id": "int64", "name": "string", "n": "int32"}
ROWS = [{"id": i, "name": f"r{i}", "n": i} for i in range(1, 41)]
OPTIONS = {"updated": True, "diff": True, "resolved": True, "min_checkpoint_frequency": "0s"}


@pytest.fixture
def stores(request, monkeypatch):
    """Start the store named by the test's parameter; its clients find it through the environment."""
    server = {"s3": devservers.moto_s3, "gs": devservers.fake_gcs, "azure": devservers.azurite}[request.param]()
    request.addfinalizer(server.stop)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    return request.param, server


def project(tmp_path, uri: str, sink_options: dict | None = None, feed_options: dict | None = None):
    table = Table(tmp_path / "data" / "t", COLUMNS, ["id"], ROWS)
    sink = {"name": "out", "uri": uri, **({"options": sink_options} if sink_options else {})}
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(table.path), "primary_key": ["id"], "spans": 2}},
        [{"name": "f", "tables": ["s.t"], "sink": "out", "options": {**OPTIONS, **(feed_options or {})}}],
        [sink],
    )
    return root, table


def changes(table: Table) -> None:
    table.update("id <= 5", n="n + 100")
    table.delete("id > 35")
    table.append([{"id": 100 + i, "name": f"new{i}", "n": i} for i in range(5)])


@pytest.mark.parametrize("stores", ["s3", "gs", "azure"], indirect=True)
def test_a_feed_into_an_object_store_verifies(stores, tmp_path):
    scheme, server = stores
    store = SinkFolder(f"{scheme}://feeds", str(tmp_path))
    store.fs.mkdir("feeds")
    root, table = project(tmp_path, f"{scheme}://feeds/movr/rides", {"partition_format": "hourly"})

    first = run(root)["f"]
    assert first.status == "running" and first.messages == len(ROWS), first
    changes(table)
    second = run(root)["f"]
    assert second.messages == 5 + 5 + 5, second
    assert_verified(root, "f")

    listed = SinkFolder(f"{scheme}://feeds/movr/rides", str(tmp_path)).list()
    resolved = [n for n in listed if n.endswith(".RESOLVED")]
    data = [n for n in listed if n.endswith(".ndjson")]
    assert resolved and data and len(resolved) + len(data) == len(listed), listed
    assert all(n.count("/") == 2 for n in listed), listed  # 2026-11-22/14/<file>: hourly folders


def test_s3_credentials_come_from_env_var_and_never_show(tmp_path, monkeypatch):
    with devservers.moto_s3() as server:
        for name in ("AWS_ENDPOINT_URL", "AWS_REGION"):
            monkeypatch.setenv(name, server.env[name])
        monkeypatch.setenv("FEED_AWS_KEY", "AKIAFEEDCTLSECRET01")
        monkeypatch.setenv("FEED_AWS_SECRET", "s3cr3t-value-never-printed")
        SinkFolder(
            "s3://creds", str(tmp_path), {"key": "AKIAFEEDCTLSECRET01", "secret": "s3cr3t-value-never-printed"}
        ).fs.mkdir("creds")
        uri = (
            "s3://creds/out?AWS_ACCESS_KEY_ID={{ env_var('FEED_AWS_KEY') }}"
            "&AWS_SECRET_ACCESS_KEY={{ env_var('FEED_AWS_SECRET') }}"
        )
        root, table = project(tmp_path, uri)
        cli = Cli(root)
        compiled = cli("compile")
        assert compiled.exit_code == 0, compiled.output
        assert run(root)["f"].messages == len(ROWS)
        assert_verified(root, "f")
        shown = [cli("jobs", "--json").output, cli("ls").output, compiled.output]
        shown += [
            p.read_text(errors="replace")
            for p in (root / "target").rglob("*")
            if p.is_file() and p.suffix in (".json", ".sql", ".log", ".txt")
        ]
        for text in shown:
            assert "s3cr3t-value-never-printed" not in text and "AKIAFEEDCTLSECRET01" not in text
        assert "s3://creds/out" in json.dumps(job_of(root, "f"))


@pytest.mark.parametrize("kind", ["s3", "gs", "azure"])
def test_a_store_that_throttles_is_retried_through(kind, tmp_path, monkeypatch):
    """Every third request to the store is answered 503 (S3's SlowDown), five of them (one on Azure, whose
    client waits 15 s and more before each retry of a throttled request, and which no storage option shortens):
    the clients' retries with backoff, then the runner's, carry the run through, and nothing is lost."""
    throttled = 1 if kind == "azure" else 5
    server = {"s3": devservers.moto_s3, "gs": devservers.fake_gcs, "azure": devservers.azurite}[kind]()
    try:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        bucket = f"{kind}://throttled"
        SinkFolder(bucket, str(tmp_path)).fs.mkdir("throttled")
        with devservers.flaky_proxy(server, fail_every=3, folder=tmp_path / "proxy", max_failures=throttled) as proxy:
            for name, value in proxy.env.items():
                monkeypatch.setenv(name, value)
            root, table = project(tmp_path, f"{bucket}/out")
            assert run(root, retries=3)["f"].messages == len(ROWS)
            changes(table)
            assert run(root, retries=3)["f"].messages == 15
            assert_verified(root, "f")
            failed = (tmp_path / "proxy" / "failures.log").read_text().splitlines()
            assert len(failed) == throttled and all(line.startswith("503 ") for line in failed)
    finally:
        server.stop()


def test_a_store_that_goes_away_pauses_the_job_and_loses_nothing(tmp_path, monkeypatch):
    server = devservers.fake_gcs()
    port, folder = server.port, server.folder
    server.owns_folder = False
    try:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        SinkFolder("gs://feeds", str(tmp_path)).fs.mkdir("feeds")
        root, table = project(tmp_path, "gs://feeds/out", feed_options={"on_error": "pause"})
        assert run(root)["f"].messages == len(ROWS)
        before = job_of(root, "f")

        server.stop()
        changes(table)
        report = run(root)["f"]  # the client's own retries give up after about 30 s
        assert report.status == "paused" and report.error, report
        paused = job_of(root, "f")
        assert paused["status"] == "paused" and paused["high_water_timestamp"] == before["high_water_timestamp"], paused

        server = devservers.fake_gcs(port, folder)
        assert Cli(root)("resume", "f").exit_code == 0
        assert run(root)["f"].messages == 15
        assert_verified(root, "f")
    finally:
        server.owns_folder = True
        server.stop()


@pytest.mark.parametrize("stores", ["s3"], indirect=True)
def test_batches_staged_on_an_object_store_reach_the_sink(stores, tmp_path):
    """`staging:` an S3 URL: the change batches go through the store, not the driver's disk, and a
    checkpointed batch's staging is removed."""
    _, server = stores
    stage = SinkFolder("s3://stage", str(tmp_path))
    stage.fs.mkdir("stage")
    root, table = project(tmp_path, "file://target/sink/out")
    with open(root / "project.yml", "a") as f:
        f.write("staging: s3://stage/feedctl\n")
    assert run(root)["f"].messages == len(ROWS)
    changes(table)
    assert run(root)["f"].messages == 5 + 5 + 5
    assert_verified(root, "f")
    assert not (root / "target" / "stage").exists(), "a batch was staged on the driver's disk"
    assert not [p for p in stage.fs.find("stage") if p.endswith(".parquet")], "a checkpointed batch's staging stayed"
