"""One client per sink in a process: a hundred batches into Kafka, a webhook and S3 (moto), their resolved
messages too, go through the one Kafka producer, the one object-store filesystem and the webhook connections
the process holds for each sink, rather than one per batch, task or resolved write; all of them closed when
the node drains."""

from __future__ import annotations

from feedctl.sinks import cloudstorage, kafka, registry, webhook
from feedctl.sinks.cloudstorage import SinkFolder
from feedctl.testing import devservers
from support import Cli
from support.e2e import CHURN_ROWS, Table, run, write_project
from support.projects import json_lines

COLUMNS = {"id": "int64", "name": "string", "n": "int32"}
OPTIONS = {"updated": True, "resolved": True, "min_checkpoint_frequency": "0s", "batch_rows": 1}
BATCHES = 100


def test_a_hundred_batches_go_through_one_client_per_sink(tmp_path, monkeypatch):
    with devservers.moto_s3() as s3, devservers.tansu() as broker, devservers.webhook(folder=tmp_path / "hook") as hook:
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        SinkFolder("s3://lake", str(tmp_path)).fs.mkdir("lake")
        table = Table(tmp_path / "data" / "t", COLUMNS, ["id"], CHURN_ROWS)
        sinks = {
            "to_kafka": f"kafka://{broker.env['KAFKA_BOOTSTRAP']}?topic_prefix=held_",
            "to_webhook": hook.env["WEBHOOK_URL"].replace("http://", "webhook-http://"),
            "to_s3": "s3://lake/out",
        }
        root = write_project(
            tmp_path / "p",
            {"t": {"path": str(table.path), "primary_key": ["id"], "spans": 2}},
            [{"name": feed, "tables": ["s.t"], "sink": feed, "options": OPTIONS} for feed in sinks],
            [{"name": name, "uri": uri} for name, uri in sinks.items()],
        )
        assert {f: r.messages for f, r in run(root).items()} == dict.fromkeys(sinks, len(CHURN_ROWS))
        registry.close_clients()
        made = (kafka.PRODUCERS.made, cloudstorage.FILESYSTEMS.made, webhook.CONNECTIONS.made)
        for i in range(BATCHES):
            table.append([{"id": 1000 + i, "name": f"n{i}", "n": i}])
        reports = run(root)
        assert all(r.messages == BATCHES and r.batches >= BATCHES for r in reports.values()), reports

        assert kafka.PRODUCERS.made - made[0] == 1 and kafka.PRODUCERS.held() == 1
        assert cloudstorage.FILESYSTEMS.made - made[1] == 1 and cloudstorage.FILESYSTEMS.held() == 1
        # a connection per writer at once (a span's task each), however many requests one after another
        connections = webhook.CONNECTIONS.made - made[2]
        assert 1 <= connections <= 2 and webhook.CONNECTIONS.held() == connections, connections
        registry.close_clients()
        assert (kafka.PRODUCERS.held(), cloudstorage.FILESYSTEMS.held(), webhook.CONNECTIONS.held()) == (0, 0, 0)

        for feed in sinks:
            capture = ("--capture", hook.env["WEBHOOK_CAPTURE"]) if feed == "to_webhook" else ()
            result = Cli(root)("verify", feed, "--json", *capture)
            assert result.exit_code == 0 and all(r["ok"] for r in json_lines(result.stdout)), result.output
