"""Pushdown at read time, end to end: a feed whose CDC query selects one partition of a table partitioned
ten ways reads only that partition's files, for its initial scan and for its catch-up, and verify is clean.

The other partitions' files are moved out of the table while the feed runs: a reader that opened one would
fail (a second feed without the condition shows it does)."""

from __future__ import annotations

import shutil
from pathlib import Path

from feedctl.source.delta import DeltaSource
from support import Cli, json_lines
from support.e2e import Table, assert_verified, file_sink, write_project

REGIONS = [f"r{i}" for i in range(10)]
COLUMNS = {"id": "int64", "region": "string", "v": "int64"}


def rows(ids, v: int = 0) -> list[dict]:
    return [{"id": i, "region": REGIONS[i % 10], "v": v + i} for i in ids]


class Hidden:
    """Every partition's files but r3's moved out of the table (data and change data) while in the block."""

    def __init__(self, table: Path):
        self.moves = [
            (table / sub / f"region={r}", table.parent / f"hidden-{sub.strip('_') or 'data'}-{r}")
            for sub in ("", "_change_data")
            for r in REGIONS
            if r != "r3"
        ]

    def __enter__(self):
        for place, away in self.moves:
            if place.exists():
                shutil.move(place, away)

    def __exit__(self, *exc):
        for place, away in self.moves:
            if away.exists():
                shutil.move(away, place)


def batch_events(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return [e for e in json_lines(result.output) if e.get("event") == "batch"]


def test_a_query_on_one_partition_reads_only_its_files(tmp_path):
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(range(200)), partition_by=["region"])
    feeds = [
        {"name": "one_region", "query": "one_region.sql", "sink": "one", "options": {"updated": True}},
        {"name": "all_regions", "tables": ["s.t"], "sink": "all"},
    ]
    query = "SELECT id, v FROM {{ source('s', 't') }} WHERE region = 'r3'\n"
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        feeds,
        [file_sink("one"), file_sink("all")],
        files={"feeds/one_region.sql": query},
    )
    cli = Cli(root)

    with Hidden(t.path):
        (scan,) = batch_events(cli("run", "-s", "one_region", json_logs=True))
    assert (scan["files_read"], scan["files_total"]) == (1, 10) and 0 < scan["bytes_read"] * 5 < scan["bytes_total"]

    t.update("id < 100", v="v + 1000")  # every partition
    t.delete("id >= 180")
    t.append(rows(range(200, 230)))
    t.update("id = 15", region="'r3'")  # moves into r3 ...
    t.update("id = 23", region="'r6'")  # ... and out of it
    changes = DeltaSource("s.t", str(t.path)).changes(0, t.version).read_all().to_pylist()
    in_r3 = sum(1 for c in changes if c["region"] == "r3")
    with Hidden(t.path):
        catch_up = batch_events(cli("run", "-s", "one_region", json_logs=True))
        assert sum(e["rows_read"] for e in catch_up) == in_r3 < len(changes) // 5
        failed = cli("run", "-s", "all_regions")
        assert "a data file is gone" in failed.output  # the control: reading every partition fails
    assert_verified(root, "one_region")
