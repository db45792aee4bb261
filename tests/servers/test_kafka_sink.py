"""Feeds into a real Kafka broker (Tansu, on 127.0.0.1): a topic per table, the key as the message key, one
partition per key, resolved messages on every partition, checked by `feedctl verify` reading the topics;
a broker that goes away pauses the job, and nothing is lost once it is back.
"""

from __future__ import annotations

import json
import re

from feedctl.sinks import kafka
from feedctl.testing import devservers
from support import Cli
from support.cli import checks_of
from support.e2e import CHURN_CHANGES, CHURN_ROWS, Table, assert_verified, churn, job_of, run, write_project

COLUMNS = {"id": "int64", "name": "string", "n": "int32"}
OPTIONS = {"updated": True, "diff": True, "resolved": True, "min_checkpoint_frequency": "0s"}


def project(tmp_path, uri: str, sink_options: dict | None = None, feed_options: dict | None = None):
    tables = {name: Table(tmp_path / "data" / name, COLUMNS, ["id"], CHURN_ROWS) for name in ("users", "rides")}
    sink = {"name": "bus", "uri": uri, **({"options": sink_options} if sink_options else {})}
    root = write_project(
        tmp_path / "p",
        {n: {"path": str(t.path), "primary_key": ["id"], "spans": 3} for n, t in tables.items()},
        [
            {
                "name": "f",
                "tables": ["s.users", "s.rides"],
                "sink": "bus",
                "options": {**OPTIONS, **(feed_options or {})},
            }
        ],
        [sink],
    )
    return root, tables


def test_a_feed_into_kafka_verifies(tmp_path):
    with devservers.tansu() as broker:
        uri = f"kafka://{broker.env['KAFKA_BOOTSTRAP']}?topic_prefix=movr_"
        root, tables = project(
            tmp_path,
            uri,
            {
                "kafka_sink_config": {
                    "Compression": "LZ4",
                    "ClientID": "feedctl-test",
                    "Flush": {"Messages": 100, "Frequency": "10ms"},
                },
                "extra_headers": {"source": "feedctl"},
            },
        )
        checked = checks_of(Cli(root)("debug", json_logs=True))["sink bus"]  # the brokers answer
        assert checked["ok"], checked
        assert run(root)["f"].messages == 2 * len(CHURN_ROWS)
        for table in tables.values():
            churn(table)
        report = run(root)["f"]
        assert report.messages == 2 * CHURN_CHANGES and report.files == 0, report
        assert_verified(root, "f")
        said = Cli(root)("verify", "f").stdout  # a topic's resolved timestamps are messages, not files
        assert re.search(r"^  \d+ resolved messages, \d+ messages", said, re.M) and "data files" not in said, said

        read = kafka.read_topics(uri, ["movr_users", "movr_rides"], idle=1.0)
        assert {t for t, _ in read} == {"movr_users", "movr_rides"}
        partition_of = {}
        for (topic, partition), records in read.items():
            keyed = [(json.loads(k), json.loads(v)) for _, k, v in records if k is not None]
            resolved = [json.loads(v) for _, k, v in records if k is None]
            assert resolved and all(set(r) == {"resolved"} for r in resolved), (topic, partition)
            for key, value in keyed:
                assert isinstance(key, list) and "key" not in value and set(value) >= {"after", "before", "updated"}
                assert partition_of.setdefault((topic, key[0]), partition) == partition  # one partition per key
        assert len(partition_of) == 2 * (len(CHURN_ROWS) + 5)
        assert len({p for (t, _), p in partition_of.items() if t == "movr_users"}) > 1  # keys spread out


def test_a_broker_that_goes_away_pauses_the_job_and_loses_nothing(tmp_path, monkeypatch):
    # Deliveries to the broker gone time out after 10 s rather than a minute: the same failure, sooner. The
    # producer's settings are made on the driver, in this process, and travel to the tasks.
    monkeypatch.setattr(kafka, "MESSAGE_TIMEOUT_MS", 10_000)
    with devservers.moto_s3() as s3:
        from feedctl.sinks.cloudstorage import SinkFolder

        SinkFolder(
            "s3://tansu",
            str(tmp_path),
            {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing", "region": s3.env["AWS_REGION"]},
        ).fs.mkdir("tansu")
        broker = devservers.tansu(s3=s3)
        try:
            uri = f"kafka://{broker.env['KAFKA_BOOTSTRAP']}"
            root, tables = project(tmp_path, uri, feed_options={"on_error": "pause"})
            assert run(root)["f"].messages == 2 * len(CHURN_ROWS)
            before = job_of(root, "f")

            broker.stop()
            for table in tables.values():
                churn(table)
            report = run(root)["f"]  # deliveries time out (message.timeout.ms), the batch fails
            assert report.status == "paused" and report.error, report
            paused = job_of(root, "f")
            assert paused["high_water_timestamp"] == before["high_water_timestamp"], paused

            broker = devservers.tansu(broker.port, s3=s3)
            assert Cli(root)("resume", "f").exit_code == 0
            assert run(root)["f"].messages == 2 * CHURN_CHANGES
            assert_verified(root, "f")
        finally:
            broker.stop()
