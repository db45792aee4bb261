"""`feedctl ls`: the feeds, tables and sinks of a project, as text and as JSON lines; it writes nothing."""

from __future__ import annotations

import json

from support import Cli
from support.cli import DEMO_FEEDS, DEMO_TABLES, assert_clean, set_line


def test_ls_text(demo_project):
    result = Cli(demo_project)("ls")
    assert result.exit_code == 0, result.output
    assert_clean(result)
    out = result.stdout
    for name in [*DEMO_FEEDS, *DEMO_TABLES, "warehouse_files", "dispatch"]:
        assert name in out, name
    # each feed's row names its sink
    for feed, sink in (("movr_all", "warehouse_files"), ("vehicles_in_use", "dispatch"), ("ride_ends", "ride_events")):
        row = next(line for line in out.splitlines() if f" {feed} " in line)
        assert sink in row


def test_ls_json(demo_project):
    result = Cli(demo_project)("ls", json_logs=True)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(r, dict) for r in records)
    by_name = {r["name"]: r for r in records}
    assert len(records) == len(by_name) == 3
    assert by_name["movr_all"]["tables"] == DEMO_TABLES
    assert by_name["movr_all"]["sink"] == "warehouse_files"
    assert by_name["vehicles_in_use"]["tables"] == ["movr.vehicles"]
    assert by_name["vehicles_in_use"]["sink"] == "dispatch"
    assert by_name["vehicles_in_use"]["sink_uri"] == "file://target/sink/dispatch"
    assert by_name["ride_ends"]["tables"] == ["movr.rides"]
    assert by_name["ride_ends"]["sink"] == "ride_events"
    assert by_name["ride_ends"]["file"] == "feeds/movr.yml:26"


def test_ls_writes_nothing(demo_project):
    assert Cli(demo_project)("ls").exit_code == 0
    assert not (demo_project / "target").exists()


def test_ls_shows_users_text_as_it_is(init_project):
    """Descriptions are text, never terminal markup: brackets are printed, not interpreted."""
    set_line(
        init_project / "feeds" / "orders.yml",
        "    description: Every change",
        '    description: "Orders [/x] and [bold]loud[/bold] :smile:"',
    )
    result = Cli(init_project)("ls")
    assert result.exit_code == 0, result.output
    assert_clean(result)
    assert "[/x]" in result.stdout and "[bold]loud[/bold]" in result.stdout and ":smile:" in result.stdout
