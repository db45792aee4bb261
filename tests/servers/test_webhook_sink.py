"""Feeds into a real HTTP(S) endpoint on 127.0.0.1 (`feedctl.testing.webhook_capture`, a child process): batches of
`{"payload": [...], "length": N}` cut by Flush, the auth header and extra headers on every request, compressed
bodies, resolved timestamps as requests of their own, checked by `feedctl verify --capture`. An endpoint that
fails or stalls is retried through; one that goes away pauses the job, and nothing is lost once it is back.
"""

from __future__ import annotations

import base64
import json

import pytest

from feedctl.sinks.webhook import read_capture, sink_config
from feedctl.testing import devservers
from feedctl.testing.webhook_capture import control
from support import Cli
from support.e2e import CHURN_CHANGES, CHURN_ROWS, Table, churn, job_of, run, write_project

COLUMNS = {"id": "int64", "name": "string", "n": "int32"}
OPTIONS = {"updated": True, "diff": True, "resolved": True, "min_checkpoint_frequency": "0s"}
TOKEN = "Bearer s3cr3t-hook-token"


def project(tmp_path, uri: str, sink_options: dict, feed_options: dict | None = None):
    tables = {name: Table(tmp_path / "data" / name, COLUMNS, ["id"], CHURN_ROWS) for name in ("users", "rides")}
    root = write_project(
        tmp_path / "p",
        {n: {"path": str(t.path), "primary_key": ["id"], "spans": 3} for n, t in tables.items()},
        [
            {
                "name": "f",
                "tables": ["s.users", "s.rides"],
                "sink": "hook",
                "options": {**OPTIONS, **(feed_options or {})},
            }
        ],
        [{"name": "hook", "uri": uri, "options": sink_options}],
    )
    return root, tables


def verify(root, capture) -> dict:
    result = Cli(root)("verify", "f", "--capture", str(capture), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, result.stdout
    return report


# --- against a real endpoint --------------------------------------------------------------------------


def test_a_feed_into_an_https_webhook_verifies(tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    with devservers.webhook(tls=True, auth=TOKEN) as endpoint:
        cert = (endpoint.folder / "cert.pem").read_text()
        uri = (
            endpoint.env["WEBHOOK_URL"].replace("https://", "webhook-https://")
            + "/cdc?ca_cert="
            + base64.b64encode(cert.encode()).decode()
        )
        root, tables = project(
            tmp_path,
            uri,
            {
                "webhook_auth_header": "{{ env_var('HOOK_TOKEN') }}",
                "extra_headers": {"X-Feed": "f"},
                "compression": "gzip",
                "webhook_sink_config": {"Flush": {"Messages": 7, "Frequency": "10ms"}},
            },
        )
        assert run(root)["f"].messages == 2 * len(CHURN_ROWS)
        for table in tables.values():
            churn(table)
        report = run(root)["f"]
        assert report.messages == 2 * CHURN_CHANGES and report.files == 0, report

        capture = endpoint.env["WEBHOOK_CAPTURE"]
        checked = verify(root, capture)
        assert checked["messages"] == 2 * len(CHURN_ROWS) + 2 * CHURN_CHANGES and checked["resolved_files"] >= 2, (
            checked
        )

        requests = read_capture(capture)
        assert all(
            r["path"] == "/cdc" and r["headers"]["X-Feed"] == "f" and r["headers"]["Content-Encoding"] == "gzip"
            for r in requests
        )
        bodies = [json.loads(r["body"]) for r in requests]
        batches = [b for b in bodies if "payload" in b]
        assert all(b["length"] == len(b["payload"]) <= 7 for b in batches)
        assert max(b["length"] for b in batches) == 7
        resolved = [b for b in bodies if "payload" not in b]
        assert resolved and all(set(b) == {"resolved"} for b in resolved)
        message = batches[0]["payload"][0]
        assert set(message) >= {"after", "before", "key", "topic", "updated"} and message["topic"] in ("users", "rides")

        assert "s3cr3t" not in Cli(root)("jobs").output
        assert not [p for p in (root / "target").rglob("*") if p.is_file() and b"s3cr3t" in p.read_bytes()]


def test_a_failing_endpoint_is_retried_through_and_one_that_goes_away_pauses_the_job(tmp_path):
    endpoint = devservers.webhook(folder=tmp_path / "endpoint")  # the capture outlives a stop
    try:
        uri = endpoint.env["WEBHOOK_URL"].replace("http://", "webhook-http://") + "/"
        root, tables = project(
            tmp_path,
            uri,
            {
                "webhook_client_timeout": "500ms",
                "webhook_sink_config": {
                    "Flush": {"Bytes": 2000, "Frequency": "10ms"},
                    "Retry": {"Max": 4, "Backoff": "50ms"},
                },
            },
            {"on_error": "pause"},
        )
        capture = endpoint.env["WEBHOOK_CAPTURE"]
        # Three requests answered 503, then one that answers only after the client gave up on it: 3 s, far past
        # its 500 ms timeout, so that a client starved of CPU (other tests' JVMs) still gives up first.
        control(endpoint.env["WEBHOOK_URL"], {"fail": 3, "status": 503, "delay": 3.0, "count": 1})
        assert run(root)["f"].messages == 2 * len(CHURN_ROWS)
        first = verify(root, capture)
        assert first["duplicates"] >= 1, first  # the stalled request was sent again: at least once

        before = job_of(root, "f")
        endpoint.stop()
        for table in tables.values():
            churn(table)
        report = run(root)["f"]
        assert report.status == "paused" and "request failed after 5 attempts" in report.error, report
        assert job_of(root, "f")["high_water_timestamp"] == before["high_water_timestamp"]

        endpoint = devservers.webhook(endpoint.port, endpoint.folder)
        assert Cli(root)("resume", "f").exit_code == 0
        assert run(root)["f"].messages == 2 * CHURN_CHANGES
        after = verify(root, capture)
        assert after["messages"] >= 2 * len(CHURN_ROWS) + 2 * CHURN_CHANGES
        assert all(len(r["body"]) < 2000 + 400 for r in read_capture(capture))  # cut by Bytes (+ one message)
    finally:
        endpoint.stop()


def test_a_flapping_endpoint_is_retried_with_waits_capped_and_started_again_once_the_feed_moves(tmp_path):
    """The sink fails four requests, then, once the feed has moved on, three more: the waits double up to
    the cap, and the second streak starts again from the first wait."""
    from feedctl.commands.run import run_feeds
    from feedctl.node.settings import RunSettings

    with devservers.webhook(folder=tmp_path / "endpoint") as endpoint:
        uri = endpoint.env["WEBHOOK_URL"].replace("http://", "webhook-http://") + "/"
        table = Table(tmp_path / "data" / "users", COLUMNS, ["id"], CHURN_ROWS)
        root = write_project(  # one span: one request at a time, so each failure fails one attempt
            tmp_path / "p",
            {"users": {"path": str(table.path), "primary_key": ["id"], "spans": 1}},
            [{"name": "f", "tables": ["s.users"], "sink": "hook", "options": OPTIONS}],
            [{"name": "hook", "uri": uri, "options": {"webhook_sink_config": {"Retry": {"Max": 0}}}}],
        )
        events = []

        def log(message, **fields):
            events.append(fields)
            if fields.get("event") == "resolved" and not any(e.get("event") == "resolved" for e in events[:-1]):
                churn(table)  # the scan is emitted and resolved: the sink flaps again over the changes
                control(endpoint.env["WEBHOOK_URL"], {"fail": 3, "status": 503})

        control(endpoint.env["WEBHOOK_URL"], {"fail": 4, "status": 503})
        [report] = run_feeds(
            root, None, RunSettings(retries=5, retry_backoff=0.05, max_backoff=0.2, closed_lag=0), log=log
        )
        assert report.status == "running" and report.messages == len(CHURN_ROWS) + CHURN_CHANGES, report
        assert [e["wait"] for e in events if e.get("event") == "retry"] == [0.05, 0.1, 0.2, 0.2, 0.05, 0.1, 0.2]
        assert verify(root, endpoint.env["WEBHOOK_CAPTURE"])["messages"] >= len(CHURN_ROWS) + CHURN_CHANGES


def test_a_webhook_that_refuses_the_request_fails_at_once_and_one_that_is_down_after_its_retries(tmp_path):
    from feedctl.sinks.webhook import WebhookSinkError, WebhookWriter

    with devservers.webhook(auth=TOKEN) as endpoint:
        uri = endpoint.env["WEBHOOK_URL"].replace("http://", "webhook-http://") + "/x"
        writer = WebhookWriter(sink_config(uri, {"webhook_sink_config": {"Retry": {"Max": "inf"}}}))
        with pytest.raises(WebhookSinkError, match="answered HTTP 401"):  # no auth header: never retried
            writer.post('{"resolved":"1.0000000000"}')
        port = endpoint.port
    writer = WebhookWriter(
        sink_config(
            f"webhook-http://127.0.0.1:{port}/x", {"webhook_sink_config": {"Retry": {"Max": 2, "Backoff": "10ms"}}}
        )
    )
    with pytest.raises(WebhookSinkError, match="after 3 attempts"):
        writer.post('{"resolved":"1.0000000000"}')
