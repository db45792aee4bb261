"""`feedctl retention TABLE`: the oldest version of a table a job still needs, and the VACUUM that keeps it;
`status` and `jobs --json` say each table's headroom."""

from __future__ import annotations

import json

from deltalake import DeltaTable, write_deltalake

from support import Cli, write_delta
from support.e2e import file_sink, write_project


def _project(tmp_path):
    tables = {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}}
    feeds = [{"name": "f", "tables": ["s.orders"], "sink": "out", "options": {"initial_scan": "no"}}]
    root = write_project(tmp_path / "p", tables, feeds, [file_sink("out")])
    path = root / "target/warehouse/s/orders"
    write_delta(path, {"id": "int64", "region": "string"}, [{"id": 1, "region": "a"}])
    DeltaTable(str(path)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 2 days"})
    return root, path


def test_retention_names_the_oldest_version_a_job_needs_and_the_vacuum_that_keeps_it(tmp_path):
    root, path = _project(tmp_path)
    cli = Cli(root)
    result = cli("retention", "s.orders")
    assert result.exit_code == 0 and "s.orders: no running or paused job reads it" in result.output
    assert cli("run").exit_code == 0  # the job starts after version 1, and needs version 2 on
    job_id = json.loads(cli("jobs", "--json").stdout)["job_id"]
    result = cli("retention", "s.orders")
    assert result.exit_code == 0, result.output
    assert f"version 2 is the oldest a job still needs (job {job_id}, feed f)" in result.output
    assert "not committed yet" in result.output

    write_deltalake(str(path), DeltaTable(str(path)).to_pyarrow_table().slice(0, 0), mode="append")  # version 2
    answer = json.loads(cli("retention", "s.orders", "--json").stdout)
    assert answer["needed_version"] == 2 and answer["retention_seconds"] == 2 * 86_400
    assert 2 * 86_400 - 120 < answer["headroom_seconds"] <= 2 * 86_400 and answer["low"] is False
    assert answer["vacuum_retain"] == "RETAIN 25 HOURS"  # its age, and a day's margin
    text = cli("retention", "s.orders").output
    assert f"kept by: VACUUM delta.`{path}` RETAIN 25 HOURS (or longer)" in text

    record = json.loads(cli("jobs", "--json").stdout)
    assert [(h["table"], h["needed_version"], h["low"]) for h in record["history_headroom"]] == [("s.orders", 2, False)]
    status = cli("status", "f").output
    assert "history of s.orders: version 2 on kept for 48.0 h more of its 48 h retention" in status
    page = (root / "target/docs/index.html").read_text() if cli("docs", "generate").exit_code == 0 else ""
    assert '<span class="headroom">s.orders: 48.0 h</span>' in page

    result = cli("retention", "s.order")
    assert result.exit_code == 2 and 'did you mean "s.orders"' in result.output
    DeltaTable(str(path)).alter.set_table_properties({"delta.logRetentionDuration": "a month"})
    result = cli("retention", "s.orders")
    assert result.exit_code == 2 and "delta.logRetentionDuration: 'a month' is not an interval" in result.output
