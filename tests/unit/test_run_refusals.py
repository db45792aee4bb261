"""What `feedctl run` refuses before it starts anything: options it cannot honour yet, and feeds pinned by
execution_locality to other runners. No job is created, no Spark starts."""

from __future__ import annotations

import pytest

from support import Cli, json_lines, write_delta
from support.e2e import file_sink, write_project

from feedctl.coordinator.locality import matches as locality_matches


def _project(tmp_path, options: dict):
    root = write_project(tmp_path / "p", {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
                         [{"name": "orders", "tables": ["s.orders"], "sink": "files", "options": options}],
                         [file_sink("files")])
    write_delta(root / "target/warehouse/s/orders", {"id": "int64"}, [{"id": 1}])
    return root


@pytest.mark.parametrize(("options", "note"), [
    ({"format": "avro", "envelope": "bare"}, "format: avro is written with envelope: wrapped only"),
    ({"schema_change_policy": "stop"}, "cannot be run yet")])
def test_options_a_run_cannot_honour_yet_are_refused(tmp_path, options, note):
    root = _project(tmp_path, options)
    result = Cli(root)("run", json_logs=True)
    assert result.exit_code == 1
    [done] = [e for e in json_lines(result.stdout) if e.get("event") == "feed_done"]
    assert done["status"] == "error" and note in done["note"]
    assert json_lines(Cli(root)("jobs", "--json").stdout) == []


def test_execution_locality_runs_only_on_a_matching_runner(tmp_path):
    root = _project(tmp_path, {"execution_locality": "region=us-east1"})
    skipped = Cli(root)("run", "--locality", "region=europe-west1,zone=b", json_logs=True)
    assert skipped.exit_code == 0, skipped.output
    [done] = [e for e in json_lines(skipped.stdout) if e.get("event") == "feed_done"]
    assert done["status"] == "skipped" and "execution_locality" in done["note"]
    assert json_lines(Cli(root)("jobs", "--json").stdout) == []
    assert Cli(root)("run", "--locality", "region").exit_code == 2


def test_locality_tiers_match_as_a_subset():
    assert locality_matches("region=us-east1", "region=us-east1,zone=a")
    assert locality_matches("region=us-east1,zone=a", "zone=a,region=us-east1")
    assert not locality_matches("region=us-east1,zone=a", "region=us-east1")
    assert not locality_matches("region=us-east1", "")
