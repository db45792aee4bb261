"""`feedctl tail`: a sinkless changefeed printed from now on, in-process on Spark."""

from __future__ import annotations

import json
import threading
import time

from deltalake import DeltaTable

from feedctl.commands.tail import tail
from support import Cli, write_delta
from support.e2e import write_project


def test_tail_prints_changes_from_now_on_and_leaves_no_state(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "open_orders", "query": "open_orders.sql", "options": {"envelope": "wrapped"}}],
        [],
        files={
            "feeds/open_orders.sql": "SELECT id, status FROM {{ source('s', 'orders') }} "
            "WHERE status = 'open' OR event_op() = 'delete'\n"
        },
    )
    path = root / "target/warehouse/s/orders"
    write_delta(
        path,
        {"id": "int64", "status": "string"},
        [{"id": 0, "status": "open"}, {"id": 1, "status": "open"}, {"id": 2, "status": "new"}],
    )
    lines: list[tuple[str, str]] = []
    stop = threading.Event()
    worker = threading.Thread(
        target=tail, args=(root, "open_orders", lambda *told: lines.append(told), None, stop, 60, 0.2)
    )
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
    messages = [(topic, json.loads(line)) for topic, line in lines]
    assert messages == [("orders", {"after": {"id": 2, "status": "open"}}), ("orders", {"after": None})]
    assert not (root / "target/state.db").exists(), "tail keeps no state in the project"
    assert not (root / "target/sink").exists()


def test_tail_of_an_unknown_feed_is_a_usage_error(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "orders", "tables": ["s.orders"]}],
        [],
    )
    result = Cli(root)("tail", "ordres")
    assert result.exit_code == 1
    assert "FC601" in result.stderr and "Traceback" not in result.output
