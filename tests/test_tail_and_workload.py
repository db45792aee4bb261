"""`feedctl tail` (a sinkless changefeed) and the movr workload commands."""

from __future__ import annotations

import json
import threading
import time

import pytest
from deltalake import DeltaTable

from conftest import Cli, write_delta
from e2e_support import write_project

from feedctl.coordinator.tail import tail
from feedctl.project.loader import load_project


@pytest.mark.slow
def test_tail_prints_changes_from_now_on_and_leaves_no_state(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "open_orders", "query": "open_orders.sql", "options": {"envelope": "wrapped"}}],
        [], files={"feeds/open_orders.sql": "SELECT id, status FROM {{ source('s', 'orders') }} "
                                             "WHERE status = 'open' OR event_op() = 'delete'\n"})
    path = root / "target/warehouse/s/orders"
    write_delta(path, {"id": "int64", "status": "string"},
                [{"id": 0, "status": "open"}, {"id": 1, "status": "open"}, {"id": 2, "status": "new"}])
    lines: list[str] = []
    stop = threading.Event()
    worker = threading.Thread(target=tail, args=(root, "open_orders", lines.append, None, stop, 60, 0.2))
    worker.start()
    try:
        time.sleep(5)  # the existing rows are not printed: tail starts from now
        table = DeltaTable(str(path))
        table.update(predicate="id = 1", new_values={"status": "shipped"})
        table.update(predicate="id = 2", new_values={"status": "open"})  # passes the filter
        # Changes nothing: delta-rs rewrites the file without change data, which reads as a delete and
        # an insert of each of its rows; none of them is a change, and none is printed.
        table.update(predicate="id = 0", new_values={"status": "open"})
        table.delete(predicate="id = 0")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(lines) < 2:
            time.sleep(0.2)
    finally:
        stop.set()
        worker.join(120)
    messages = [json.loads(line) for line in lines]
    assert messages == [{"after": {"id": 2, "status": "open"}}, {"after": None}]
    assert not (root / "target/state.db").exists(), "tail keeps no state in the project"
    assert not (root / "target/sink").exists()


@pytest.mark.slow
def test_tail_of_an_unknown_feed_is_a_usage_error(tmp_path):
    root = write_project(tmp_path / "p", {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
                         [{"name": "orders", "tables": ["s.orders"]}], [])
    result = Cli(root)("tail", "ordres")
    assert result.exit_code == 1
    assert "FC601" in result.stderr and "Traceback" not in result.output


def test_workload_init_creates_the_demo_tables_once_and_run_commits_changes(demo_project):
    cli = Cli(demo_project)
    first = cli("workload", "init", "movr", "--rows", "12")
    assert first.exit_code == 0, first.output
    project, _ = load_project(demo_project)
    tables = {t.name: DeltaTable(t.location) for t in project.tables.values()}
    assert {n: t.to_pyarrow_table().num_rows for n, t in tables.items()} == {"users": 12, "vehicles": 12,
                                                                           "rides": 24}
    assert all(t.metadata().configuration["delta.enableChangeDataFeed"] == "true" for t in tables.values())
    again = cli("workload", "init", "movr")
    assert again.exit_code == 0 and "exists" in again.stdout

    run = cli("workload", "run", "movr", "--duration", "2s", "--rate", "10", "--seed", "3")
    assert run.exit_code == 0, run.output
    versions = sum(DeltaTable(t.location).version() for t in project.tables.values())
    assert versions >= 15, "about 20 commits, each a new Delta version"
    moved = DeltaTable(tables["vehicles"].table_uri).load_cdf(starting_version=1).read_all()
    assert moved.num_rows > 0
    assert cli("workload", "run", "movr", "--duration", "soon").exit_code == 2
