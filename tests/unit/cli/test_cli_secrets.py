"""Secrets (`env_var()`) through compile, ls and debug: never printed, never written, never hashed."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import Cli
from support.cli import diagnostics, manifest, set_line

SECRETS = {
    "KAFKA_PASSWORD": "kafka-Pw-7f3a91c2e5",
    "HOOK_TOKEN": "Bearer hook-Tok-4d8e2b6a10",
    "PG_PASSWORD": "pg-Pw-93b7c1e0d4",
    "S3_SECRET_KEY": "s3-Key-5a0c7e9b21",
}


@pytest.fixture
def secret_project(init_project, monkeypatch) -> Path:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    set_line(
        init_project / "project.yml",
        "state:",
        "state: \"postgresql+psycopg://feeder:{{ env_var('PG_PASSWORD') }}@127.0.0.1:1/feeds\"",
    )
    set_line(
        init_project / "project.yml",
        "    spark.sql.shuffle.partitions:",
        '    spark.sql.shuffle.partitions: "4"\n    spark.hadoop.fs.s3a.secret.key: "{{ env_var(\'S3_SECRET_KEY\') }}"',
    )
    sinks = init_project / "sinks" / "local.yml"
    sinks.write_text(
        sinks.read_text()
        + (
            "  - name: events\n"
            "    uri: \"kafka://broker:9092?sasl_password={{ env_var('KAFKA_PASSWORD') }}&sasl_user=u\"\n"
            "  - name: hook\n"
            "    uri: webhook-https://hooks.example.com/feed\n"
            "    options:\n"
            "      webhook_auth_header: \"{{ env_var('HOOK_TOKEN') }}\"\n"
        ),
        encoding="utf-8",
    )
    feeds = init_project / "feeds" / "orders.yml"
    feeds.write_text(
        feeds.read_text()
        + (
            "  - name: orders_to_kafka\n"
            "    tables: [shop.orders]\n"
            "    sink: events\n"
            "  - name: orders_to_hook\n"
            "    tables: [shop.orders]\n"
            "    sink: hook\n"
        ),
        encoding="utf-8",
    )
    return init_project


def assert_no_secret(text: str, where: str) -> None:
    for value in SECRETS.values():
        assert value not in text, f"secret leaked in {where}"
        assert value.split()[-1] not in text, f"secret leaked in {where}"


def test_secrets_never_leave_memory(secret_project):
    outputs = []
    for args, json_logs in [
        (("compile",), False),
        (("compile",), True),
        (("ls",), False),
        (("ls",), True),
        (("debug",), False),
        (("debug",), True),
        (("docs", "generate"), True),
    ]:
        result = Cli(secret_project)(*args, json_logs=json_logs)
        expected = {"compile": 0, "ls": 0, "debug": 1, "docs": 0}[args[0]]  # debug: no Kafka client, no Postgres
        assert result.exit_code == expected, result.output
        outputs.append((f"{args} json={json_logs}", result.stdout + result.stderr))
    for where, text in outputs:
        assert_no_secret(text, where)

    files = [p for p in (secret_project / "target").rglob("*") if p.is_file()]
    assert any(p.name == "manifest.json" for p in files)
    for path in files:
        data = path.read_bytes()
        for value in SECRETS.values():
            assert value.encode() not in data, f"secret leaked in {path}"

    m = manifest(secret_project)
    assert set(m["feeds"]) >= {"orders_to_kafka", "orders_to_hook"}
    assert m["sinks"]["events"]["uri"].startswith("kafka://broker:9092")
    assert m["sinks"]["hook"]["options"]["webhook_auth_header"] != SECRETS["HOOK_TOKEN"]
    assert m["project"]["state"].startswith("postgresql+psycopg://feeder:")
    assert m["project"]["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] != SECRETS["S3_SECRET_KEY"]


def test_secrets_stay_hidden_when_the_project_has_errors(secret_project):
    set_line(secret_project / "feeds" / "orders.yml", "    sink: events", "    sink: event")
    for json_logs in (False, True):
        result = Cli(secret_project)("compile", json_logs=json_logs)
        assert result.exit_code == 1
        assert_no_secret(result.stdout + result.stderr, f"compile json={json_logs}")


def test_a_secret_changes_the_definition_hash_only_through_its_name(secret_project, monkeypatch):
    """The definition hash is computed from redacted values: rotating a password never restarts a feed."""
    assert Cli(secret_project)("compile").exit_code == 0
    before = {n: f["definition_hash"] for n, f in manifest(secret_project)["feeds"].items()}
    monkeypatch.setenv("KAFKA_PASSWORD", "rotated-0000")
    monkeypatch.setenv("HOOK_TOKEN", "rotated-1111")
    assert Cli(secret_project)("compile").exit_code == 0
    after = {n: f["definition_hash"] for n, f in manifest(secret_project)["feeds"].items()}
    assert before == after


def test_unset_env_var_is_reported(secret_project, monkeypatch):
    monkeypatch.delenv("KAFKA_PASSWORD")
    result = Cli(secret_project)("compile", json_logs=True)
    assert result.exit_code == 1
    unset = [d for d in diagnostics(result) if d["code"] == "FC403"]
    assert [(d["file"], d["line"], d["column"]) for d in unset] == [("sinks/local.yml", 11, 10)]
