"""A table with deletion vectors and change data (the corpus's `rs__cdf-table-with-cdc-and-dvs`, written by
Spark with `DELETE`s that give files new deletion vectors, `UPDATE`s and `MERGE`s with change data files, and
`OPTIMIZE`s), followed from before its first version by two `--follow` nodes, one of them killed with its
JVM while more changes are committed; `feedctl verify` (its second reader sharing no code with the reader)
finds every change once, in order."""

from __future__ import annotations

import time

import pyarrow as pa
import yaml
from deltalake import DeltaTable, write_deltalake

from feedctl.testing.nemesis.harness import Runner
from support import Cli
from support.corpus import copy, require
from support.nodes import records, spread_over, verify_all, wait_for

FEED = "dvs"


def _project(root, table, state: str):
    (root / "feeds").mkdir(parents=True)
    (root / "sinks").mkdir()
    (root / "project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "dvs",
                "config-version": 1,
                "state": state,
                "spark": {
                    "master": "local[1]",
                    "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
                },
                "sources": [
                    {"name": "c", "tables": [{"name": "t", "path": str(table), "primary_key": ["id"], "spans": 4}]}
                ],
            },
            sort_keys=False,
        )
    )
    (root / "feeds" / "dvs.yml").write_text(
        yaml.safe_dump(
            {
                "feeds": [
                    {
                        "name": FEED,
                        "tables": ["c.t"],
                        "sink": "files",
                        "options": {"cursor": "2000-01-01T00:00:00Z", "updated": True, "diff": True, "resolved": "1s"},
                    }
                ]
            }
        )
    )
    (root / "sinks" / "files.yml").write_text(
        yaml.safe_dump({"sinks": [{"name": "files", "uri": f"file://{root / 'target' / 'sink'}"}]})
    )
    return root


def _commit(table) -> None:
    """Changes as delta-rs makes them to the same table: an append, an update and a delete."""
    schema = pa.schema(DeltaTable(str(table)).schema().to_arrow())
    start = 1000 + 10 * DeltaTable(str(table)).version()
    write_deltalake(
        str(table),
        pa.Table.from_pylist([{"id": start + i, "comment": f"new {i}"} for i in range(5)], schema=schema),
        mode="append",
    )
    DeltaTable(str(table)).update(predicate=f"id = {start}", updates={"comment": "'changed'"})
    DeltaTable(str(table)).delete(f"id = {start + 1}")


def test_two_nodes_follow_a_deletion_vector_table_through_a_kill(demo_project, tmp_path):
    require()
    state = yaml.safe_load((demo_project / "project.yml").read_text())["state"]  # SQLite, or PostgreSQL
    if state.startswith("sqlite"):
        state = f"sqlite:///{tmp_path / 'state.db'}"
    table = copy("rs__cdf-table-with-cdc-and-dvs", tmp_path / "tables")
    root = _project(tmp_path / "p", table, state)
    nodes = {n: Runner(root, root / f"{n}.log", poll_interval=0.5, node_id=n) for n in ("n0", "n1")}
    victim = None
    try:
        wait_for(spread_over(root, set(nodes), feed=FEED, tables={"c.t"}), "the spans are spread over both nodes")
        _commit(table)
        coordinator = next(j for j in records(root, "jobs") if j["feed"] == FEED)["coordinator"]
        victim = next(n for n in nodes if n != coordinator)
        nodes[victim].kill()
        _commit(table)
        committed = time.time_ns()
        wait_for(
            lambda: any(
                j["high_water_timestamp"] and int(j["high_water_timestamp"].split(".")[0]) > committed
                for j in records(root, "jobs")
                if j["feed"] == FEED
            ),
            "the job's high-water mark passes the last commit",
        )
    finally:
        codes = {name: node.stop() for name, node in nodes.items()}
    assert [c for name, c in codes.items() if name != victim] == [0]
    report = verify_all(root, [FEED])[0]
    # the table's history (its 25 versions), then two rounds of five inserts, an update and a delete
    assert report["ok"] and report["expected"] > 2 * 7 and report["messages"] >= report["expected"], report
    assert Cli(root)("verify", FEED).exit_code == 0
