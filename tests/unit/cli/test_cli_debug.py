"""`feedctl debug`: each check of a project (java, spark, project, state store, tables, sinks), OK or FAIL."""

from __future__ import annotations

import pytest

from support import Cli
from support.cli import DEMO_TABLES, HAS_JAVA, assert_clean, checks_of, set_line


def test_debug_demo_reports_missing_tables(demo_project):
    result = Cli(demo_project)("debug")
    assert result.exit_code == 1
    assert_clean(result)
    lines = result.stdout.splitlines()
    for table in DEMO_TABLES:
        assert sum(line.startswith("FAIL") and f"table {table}" in line for line in lines) == 1, table
    for name in ("spark", "project", "state store", "sink warehouse_files", "sink dispatch"):
        assert any(line.startswith("OK") and f" {name}:" in line for line in lines), name
    if HAS_JAVA:
        assert any(line.startswith("OK") and " java:" in line for line in lines)

    checks = checks_of(Cli(demo_project)("debug", json_logs=True))
    assert {n for n, c in checks.items() if not c["ok"]} - {"java"} == {f"table {t}" for t in DEMO_TABLES}
    assert checks["state store"]["ok"] and checks["spark"]["ok"]


@pytest.mark.skipif(not HAS_JAVA, reason="the java check needs a JDK")
def test_debug_init_project_passes(init_project):
    result = Cli(init_project)("debug")
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("FAIL") for line in result.stdout.splitlines())
    checks = checks_of(Cli(init_project)("debug", json_logs=True))
    assert set(checks) == {
        "java",
        "spark",
        "project",
        "state store",
        "table shop.orders",
        "sink local_files",
        "sink large_orders_files",
    }
    assert all(c["ok"] for c in checks.values())


def test_debug_unwritable_state_store(init_project, tmp_path):
    blocker = tmp_path / "a_regular_file"
    blocker.write_text("not a folder")
    set_line(init_project / "project.yml", "state:", f"state: sqlite:///{blocker}/x/state.db")
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    checks = checks_of(result)
    assert checks["state store"]["ok"] is False
    assert checks["table shop.orders"]["ok"] and checks["sink local_files"]["ok"]

    text = Cli(init_project)("debug")
    assert any(line.startswith("FAIL") and "state store" in line for line in text.stdout.splitlines())


def test_debug_broken_project(init_project):
    set_line(init_project / "sinks" / "local.yml", "  - name:", "  - name: elsewhere")
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    checks = checks_of(result)
    assert checks["project"]["ok"] is False and "FC202" in checks["project"]["detail"]


def test_debug_unwritable_file_sink(init_project, tmp_path):
    blocker = tmp_path / "a_regular_file"
    blocker.write_text("not a folder")
    set_line(init_project / "sinks" / "local.yml", "    uri:", f"    uri: file://{blocker}/sink")
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    checks = checks_of(result)
    assert checks["sink local_files"]["ok"] is False
    assert checks["state store"]["ok"] and checks["table shop.orders"]["ok"]


def test_debug_connects_to_a_standalone_master(init_project, tmp_path):
    import socket

    with open(init_project / "project.yml", "a") as f:  # executors on other hosts read a shared staging folder
        f.write(f"staging: file://{tmp_path}/shared-stage\n")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        set_line(init_project / "project.yml", "  master:", f"  master: spark://127.0.0.1:{port}")
        checks = checks_of(Cli(init_project)("debug", json_logs=True))
        assert checks["spark master"]["ok"], checks["spark master"]
    # The port is closed now: nothing listens there any more.
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    master = checks_of(result)["spark master"]
    assert master["ok"] is False and f"127.0.0.1:{port}" in master["detail"] and "refused" in master["detail"]


def test_debug_fails_a_table_without_its_change_data_feed_only_when_its_changes_come_from_it_alone(init_project):
    from deltalake import DeltaTable

    table = init_project / "data" / "shop" / "orders"
    DeltaTable(str(table)).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    result = Cli(init_project)("debug", json_logs=True)  # `changes: auto`: read from the log
    assert checks_of(result)["table shop.orders"]["ok"] is True, result.output
    project = init_project / "project.yml"
    project.write_text(project.read_text().replace("primary_key: [id]", "primary_key: [id]\n        changes: cdf"))
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    check = checks_of(result)["table shop.orders"]
    assert check["ok"] is False and "delta.enableChangeDataFeed=true" in check["detail"]


def test_a_cluster_master_with_staging_on_the_drivers_disk_is_refused(init_project):
    from support.cli import diagnostics

    set_line(init_project / "project.yml", "  master:", "  master: spark://127.0.0.1:7077")
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 1
    [problem] = [d for d in diagnostics(result) if d["code"] == "FC306"]
    assert problem["file"] == "project.yml" and problem["line"] == _line_of(init_project / "project.yml", "  master:")
    checks = checks_of(Cli(init_project)("debug", json_logs=True))
    assert checks["project"]["ok"] is False and "FC306" in checks["project"]["detail"]


def _line_of(path, prefix: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if line.startswith(prefix))


def test_debug_fails_a_kafka_sink_no_broker_answers_and_a_webhook_no_endpoint_listens_on(init_project):
    import socket

    from feedctl.testing.devservers import free_port

    dead, listening = free_port(), socket.create_server(("127.0.0.1", 0))
    try:
        (init_project / "sinks" / "remote.yml").write_text(
            "sinks:\n"
            f"  - name: bus\n    uri: kafka://127.0.0.1:{dead}\n"
            f"  - name: hook_away\n    uri: webhook-http://127.0.0.1:{dead}/in\n"
            f"  - name: hook\n    uri: webhook-http://127.0.0.1:{listening.getsockname()[1]}/in\n"
        )
        result = Cli(init_project)("debug", json_logs=True)
    finally:
        listening.close()
    assert result.exit_code == 1
    checks = checks_of(result)
    assert checks["sink bus"]["ok"] is False and "no broker answered in 5s" in checks["sink bus"]["detail"]
    assert checks["sink hook_away"]["ok"] is False
    assert f"127.0.0.1:{dead} does not accept connections" in checks["sink hook_away"]["detail"]
    assert checks["sink hook"]["ok"] and checks["sink local_files"]["ok"]
