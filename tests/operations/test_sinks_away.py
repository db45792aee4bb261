"""Sinks away for longer than any count of retries lasts, under a `--follow` node while a writer commits: a
Kafka broker SIGKILLed (its log kept in moto's S3, so that it comes back with its topics), a webhook endpoint
stopped, and an S3 store unreachable (the proxy in front of moto stopped: connections refused, as a store away
would refuse them). Each outage is waited out: every job stays `running`, its running status says what it
waits for and since when, the node says so in a few lines (none of them a client library's own), and once
the sinks are back every feed catches up by itself and verifies clean."""

from __future__ import annotations

import os
import signal
import threading
import time

from feedctl.sinks.cloudstorage import SinkFolder
from feedctl.testing import devservers
from feedctl.testing.nemesis.harness import Runner
from support import Cli
from support.e2e import Table, write_project
from support.nodes import records, wait_for
from support.projects import json_lines

COLUMNS = {"id": "int64", "name": "string", "n": "int32"}
OPTIONS = {"updated": True, "diff": True, "resolved": "1s", "min_checkpoint_frequency": "1s"}
FEEDS = ("to_kafka", "to_webhook", "to_s3")
# Seconds away: twice what five retries with the test's waits last (the first 0.2 s, capped at 2 s, a Kafka
# delivery timing out after 2 s rather than 60 s). FEEDCTL_TESTING_SINKS_AWAY=420 checks seven minutes
# away with feedctl's own waits (30 s at most, deliveries timing out after 60 s): what a user meets.
AT_LENGTH = float(os.environ.get("FEEDCTL_TESTING_SINKS_AWAY") or 0)
AWAY = AT_LENGTH or 30.0
NODE_ARGS = () if AT_LENGTH else ("--testing-retry-backoff", "0.2", "--max-retry-backoff", "2")
NODE_ENV = {} if AT_LENGTH else {"FEEDCTL_TESTING_KAFKA_MESSAGE_TIMEOUT_MS": "2000"}
MOST_LINES = 200  # what the node may write while its sinks are away


class Writer(threading.Thread):
    """Commits to the table every half second until stopped: inserts, an update, now and then a delete."""

    def __init__(self, table: Table):
        super().__init__(daemon=True)
        self.table, self.stop, self.last_commit_ns = table, threading.Event(), 0
        self.error: BaseException | None = None

    def run(self) -> None:
        k = 0
        try:
            while not self.stop.wait(0.5):
                k += 1
                self.table.append([{"id": 1000 + 2 * k + i, "name": f"w{k}", "n": k} for i in range(2)])
                self.table.update(f"id = {k % 40 + 1}", n=f"n + {k}")
                if k % 4 == 0:
                    self.table.delete(f"id = {1000 + 2 * k}")
                self.last_commit_ns = time.time_ns()
        except BaseException as exc:  # said by the test, never swallowed
            self.error = exc


def jobs_by_feed(root) -> dict[str, dict]:
    return {j["feed"]: j for j in records(root, "jobs")}


def high_water_ns(job: dict) -> int:
    return int((job.get("high_water_timestamp") or "0").split(".")[0])


def test_sinks_away_for_minutes_are_waited_out_with_every_job_running_and_nothing_lost(tmp_path, monkeypatch):
    s3 = devservers.moto_s3()
    servers = [s3]
    try:
        for bucket in ("tansu", "lake"):
            SinkFolder(
                f"s3://{bucket}", str(tmp_path), {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
            ).fs.mkdir(bucket)
        broker = devservers.tansu(s3=s3)
        broker.stop_signal = signal.SIGKILL  # a broker that dies, rather than one that shuts down
        hook = devservers.webhook(folder=tmp_path / "hook")
        # never failing a request by itself (fail_every): it only stands for the store, stopped and started
        proxy = devservers.flaky_proxy(s3, fail_every=10**9, folder=tmp_path / "proxy")
        servers += [broker, hook, proxy]
        for name, value in proxy.env.items():  # verify, in this process, reaches the store as the node does
            monkeypatch.setenv(name, value)

        table = Table(tmp_path / "data" / "t", COLUMNS, ["id"], [{"id": i, "name": f"r{i}", "n": i} for i in range(60)])
        root = write_project(
            tmp_path / "p",
            {"t": {"path": str(table.path), "primary_key": ["id"], "spans": 2}},
            [{"name": feed, "tables": ["s.t"], "sink": feed, "options": OPTIONS} for feed in FEEDS],
            [
                {"name": "to_kafka", "uri": f"kafka://{broker.env['KAFKA_BOOTSTRAP']}?topic_prefix=away_"},
                {"name": "to_webhook", "uri": hook.env["WEBHOOK_URL"].replace("http://", "webhook-http://")},
                {"name": "to_s3", "uri": "s3://lake/out"},
            ],
        )
        log = tmp_path / "node.log"
        node = Runner(
            root,
            log,
            poll_interval=0.5,
            node_id="n1",
            args=NODE_ARGS,
            env={**proxy.env, **NODE_ENV},
        )
        writer = Writer(table)
        try:
            writer.start()
            started = time.time_ns()
            wait_for(
                lambda: (
                    (j := jobs_by_feed(root)).keys() == set(FEEDS)
                    and all(high_water_ns(x) > started for x in j.values())
                ),
                "every feed follows the commits",
                timeout=300,
            )

            lines_before = len(log.read_text().splitlines())
            away_at = time.monotonic()
            for server in (broker, hook, proxy):
                server.stop()
            waiting = wait_for(
                lambda: (
                    (j := jobs_by_feed(root))
                    and all(x["running_status"].startswith("waiting since") for x in j.values())
                    and j
                ),
                "every job says what it waits for",
                timeout=120,
            )
            for feed, job in waiting.items():
                assert job["status"] == "running" and not job["error"], job
                assert "\n" not in job["running_status"], job
            time.sleep(3)  # a checkpoint of what was emitted before lands (min_checkpoint_frequency: 1 s)
            held = {feed: high_water_ns(job) for feed, job in jobs_by_feed(root).items()}
            while time.monotonic() - away_at < AWAY:  # the jobs run throughout, their marks where they were
                jobs = jobs_by_feed(root)
                assert {j["status"] for j in jobs.values()} == {"running"}, jobs
                assert {feed: high_water_ns(job) for feed, job in jobs.items()} == held, jobs
                assert node.alive(), log.read_text()[-3000:]
                time.sleep(1)

            broker = devservers.tansu(broker.port, s3=s3)
            hook = devservers.webhook(hook.port, tmp_path / "hook")
            proxy = devservers.flaky_proxy(s3, fail_every=10**9, folder=tmp_path / "proxy", port=proxy.port)
            servers += [broker, hook, proxy]
            told = log.read_text().splitlines()[lines_before:]
            time.sleep(5)  # the writer commits with the sinks back too
            writer.stop.set()
            writer.join()
            assert writer.error is None, writer.error
            last = writer.last_commit_ns
            wait_for(
                lambda: all(high_water_ns(j) > last for j in jobs_by_feed(root).values()),
                "every feed catches up with the commits made meanwhile",
                timeout=120,
            )
            jobs = jobs_by_feed(root)
            said = {f: (j["status"], j["running_status"].split(":")[0]) for f, j in jobs.items()}
            assert set(said.values()) == {("running", "running")}, said  # waiting no longer
        finally:
            writer.stop.set()
            code = node.stop()
        assert code == 0, log.read_text()[-3000:]

        assert len(told) <= MOST_LINES, f"{len(told)} lines while the sinks were away:\n" + "\n".join(told[-50:])
        assert not [line for line in told if "rdkafka" in line or line.startswith("%")], told[-50:]
        for feed in FEEDS:
            assert any(f"{feed}: " in line and "retrying until it is back" in line for line in told), (feed, told)
        said = log.read_text().splitlines()
        for feed in FEEDS:  # and once it is over, how long it lasted
            assert any(f"{feed}: " in line and "works again after" in line for line in said), (feed, said[-50:])

        reports = []
        for feed in FEEDS:
            capture = ("--capture", str(tmp_path / "hook" / "capture.ndjson")) if feed == "to_webhook" else ()
            result = Cli(root)("verify", feed, "--json", *capture)
            assert result.exit_code == 0, result.output
            reports += json_lines(result.stdout)
        assert len(reports) == len(FEEDS) and all(r["ok"] and r["messages"] > 60 for r in reports), reports
    finally:
        for server in reversed(servers):
            server.stop()
