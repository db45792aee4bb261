"""`feedctl run --follow --metrics-port`: a real node's `/metrics`, scraped with prometheus-client's parser
while a workload commits. The message counters match what the sink received, split by `metrics_label`;
`max_behind_nanos` rises while the sink is away and falls once it is back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from feedctl.sinks.webhook import read_capture
from feedctl.testing import devservers
from support.e2e import CHURN_ROWS, Table, write_project
from support.nodes import drain, wait_for

FEEDCTL = str(Path(sys.executable).parent / "feedctl")
OPTIONS = {"updated": True, "resolved": "1s", "min_checkpoint_frequency": "0s"}


def _scrape(port: int) -> dict[tuple[str, str], float]:
    """(sample name, scope) -> value, over the node's samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "scope" in sample.labels:
                key = (sample.name, sample.labels["scope"])
                out[key] = out.get(key, 0) + sample.value
    return out


def _delivered(capture: str, path: str) -> list[str]:
    """The messages the endpoint acknowledged at `path`, each once (a batch sent again repeats some)."""
    seen = []
    for request in read_capture(capture):
        body = json.loads(request["body"])
        if request["path"] == path and "payload" in body:
            seen += [json.dumps(m, sort_keys=True) for m in body["payload"]]
    return seen


def _delivered_bytes(capture: str, path: str) -> int:
    """The bytes of the messages the endpoint received at `path`, as sent, each message once."""
    decoder, seen, opening = json.JSONDecoder(), set(), '{"payload":['
    for request in read_capture(capture):
        body = request["body"]
        if request["path"] != path or not body.startswith(opening):
            continue
        at = len(opening)
        while body[at] != "]":
            _, end = decoder.raw_decode(body, at)
            seen.add(body[at:end])
            at = end + (body[end] == ",")
    return sum(len(message.encode()) for message in seen)


def test_a_nodes_metrics_count_what_the_sink_received_and_show_it_falling_behind(tmp_path):
    endpoint = devservers.webhook(folder=tmp_path / "endpoint")
    table = Table(tmp_path / "data" / "users", {"id": "int64", "name": "string", "n": "int32"}, ["id"], CHURN_ROWS)
    url = endpoint.env["WEBHOOK_URL"].replace("http://", "webhook-http://")
    root = write_project(
        tmp_path / "p",
        {"users": {"path": str(table.path), "primary_key": ["id"], "spans": 2}},
        [
            {"name": "labeled", "tables": ["s.users"], "sink": "a", "options": {**OPTIONS, "metrics_label": "users"}},
            {"name": "unlabeled", "tables": ["s.users"], "sink": "b", "options": OPTIONS},
        ],
        [{"name": "a", "uri": url + "/a"}, {"name": "b", "uri": url + "/b"}],
    )
    log = tmp_path / "node.log"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "w") as out:
        node = subprocess.Popen(
            [
                FEEDCTL,
                "--log-format",
                "json",
                "--project-dir",
                str(root),
                "run",
                "--follow",
                "--metrics-port",
                "0",
                "--poll-interval",
                "0.5",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    capture = endpoint.env["WEBHOOK_CAPTURE"]
    try:
        [served] = wait_for(
            lambda: [
                e
                for e in (json.loads(line) for line in log.read_text().splitlines() if line.startswith("{"))
                if e.get("event") == "metrics"
            ],
            "the metrics server is up",
            300,
        )
        port = served["port"]
        assert served["host"] == "127.0.0.1"

        def settled(expected: int):  # the sink received them all, and each scope counted its feed's
            m = _scrape(port)
            counted = {s: m.get(("changefeed_emitted_messages_total", s), 0) for s in ("users", "default")}
            received = {"users": len(set(_delivered(capture, "/a"))), "default": len(set(_delivered(capture, "/b")))}
            return m if counted == received == {"users": expected, "default": expected} else None

        wait_for(
            lambda: _scrape(port).get(("changefeed_emitted_messages_total", "users"), 0) >= len(CHURN_ROWS),
            "the initial scan is emitted",
            300,
        )
        for i in range(1, 6):  # a workload: five commits of one change each
            table.update(f"id = {i}", n="n + 1")
        metrics = wait_for(lambda: settled(len(CHURN_ROWS) + 5), "the counters match the sink", 300)
        for scope, path in (("users", "/a"), ("default", "/b")):  # a series per scope, with the node's others
            # a webhook's requests carry the messages as encoded: emitted and flushed bytes are theirs
            sent = _delivered_bytes(capture, path)
            assert sent > 0
            assert metrics[("changefeed_emitted_bytes_total", scope)] == sent
            assert metrics[("changefeed_flushed_bytes_total", scope)] == sent
            assert metrics[("changefeed_running", scope)] == 1
            assert metrics[("changefeed_spans_held", scope)] == 2
            assert metrics[("changefeed_commit_latency_count", scope)] >= 1
            assert metrics[("changefeed_checkpoint_progress", scope)] > time.time_ns() - 600e9
        steady = max(_scrape(port)[("changefeed_max_behind_nanos", "users")] for _ in range(3)) / 1e9

        endpoint.stop()  # the sink goes away while changes keep coming: the high-water mark stays
        table.update("id = 10", n="n + 1")
        away = wait_for(
            lambda: (m := _scrape(port)[("changefeed_max_behind_nanos", "users")] / 1e9) > steady + 8 and m,
            "max_behind_nanos rises",
            120,
        )
        endpoint = devservers.webhook(endpoint.port, endpoint.folder)
        wait_for(
            lambda: _scrape(port)[("changefeed_max_behind_nanos", "users")] / 1e9 < away - 4,
            "max_behind_nanos falls",
            120,
        )
        after = _scrape(port)
        assert after[("changefeed_error_retries_total", "users")] >= 1
        wait_for(
            lambda: (
                _scrape(port)[("changefeed_emitted_messages_total", "users")]
                == len(set(_delivered(capture, "/a")))
                == len(CHURN_ROWS) + 6
            ),
            "the change made while the sink was away is counted",
            120,
        )
        jobs = subprocess.run(
            [FEEDCTL, "--project-dir", str(root), "jobs", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert {json.loads(line)["status"] for line in jobs.stdout.splitlines()} == {"running"}
    finally:
        drain(node)
        endpoint.stop()
