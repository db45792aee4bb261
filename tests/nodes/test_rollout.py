"""The project changing under three `--follow` nodes, each with its own copy of it, deployed to them at
different moments (project.yml first, the feed file to the coordinator, then to a second node, the last node
later): the job takes a table added, a table dropped and an option changed only once every node has the
change, no node records a drop or a refusal from a half-deployed copy, none exits, and every row of the added
table and every later change reach the sink. Jobs started while the nodes follow (`cancel` then `run
--new-job --continue`, `pause` then `resume`) are taken up by the running nodes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from feedctl.project.loader import load_project
from feedctl.testing.nemesis.harness import Runner, Workload
from support import Cli, json_lines, write_delta
from support.nodes import deploy, node_copy, spread_over, status, verify_all, wait_for, with_absolute_paths

NAMES = ["n0", "n1", "n2"]
PROMOS = "      - {name: promos, path: target/warehouse/movr/promos, primary_key: [code]}\n"


class PromoWrites(threading.Thread):
    """Inserts, updates and deletes on movr.promos, a commit every 0.3 s, until stopped."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.stop, self.commits, self.error = path, threading.Event(), 0, None

    def run(self) -> None:
        try:
            while not self.stop.wait(0.3):
                n = self.commits
                table = DeltaTable(str(self.path))
                if n % 3 == 0:
                    write_deltalake(str(self.path), pa.table({"code": [f"p{n}"], "discount": [n % 40]}), mode="append")
                elif n % 3 == 1:
                    table.update(predicate=f"code = 'p{n - 1}' OR code = 'c{n % 20}'", new_values={"discount": n})
                else:
                    table.delete(f"code = 'c{(n * 7) % 20}'")
                self.commits += 1
        except BaseException as exc:  # the test fails on it, never swallows it
            self.error = exc


def sink_rows(root: Path, topic: str) -> dict[tuple, dict | None]:
    """Each key's last state in the sink's files of `topic` (read as plain JSON: no feedctl code)."""
    last: dict[tuple, tuple] = {}
    for path in sorted((root / "target/sink/warehouse").rglob(f"*-{topic}-*.ndjson")):  # the topic in its name
        for line in path.read_text().splitlines():
            message = json.loads(line)
            updated = tuple(int(p) for p in message["updated"].split("."))
            key = tuple(message["key"])
            if key not in last or updated >= last[key][0]:
                last[key] = (updated, message["after"])
    return {k: after for k, (_, after) in last.items() if after is not None}


def logs(root: Path) -> str:
    return "".join((root / f"{name}.log").read_text() for name in NAMES)


def high_water_past(root: Path, moment_ns: int):
    return lambda: int((status(root)["high_water_timestamp"] or "0").split(".")[0]) > moment_ns


# Nodes with copies of their own are hosts of their own: PostgreSQL's store (`make soak` plays rollouts on
# SQLite too, `bench/nemesis.py --nodes --changes`).
@pytest.mark.parametrize("demo_project", ["postgresql"], indirect=True)
def test_a_change_deployed_to_the_nodes_at_different_moments_is_taken_once_every_node_has_it(demo_project):
    root = demo_project
    assert Cli(root)("workload", "init", "movr").exit_code == 0
    promos = write_delta(
        root / "target/warehouse/movr/promos",
        {"code": "string", "discount": "int64"},
        [{"code": f"c{i}", "discount": i} for i in range(20)],
    )
    copies = {name: node_copy(root, name) for name in NAMES}
    nodes = {
        name: Runner(copies[name], root / f"{name}.log", poll_interval=0.5, node_id=name, feeds=("movr_all",))
        for name in NAMES
    }
    workload, writes = Workload(load_project(root)[0], 600, 4, seed=3), PromoWrites(promos)
    try:
        wait_for(spread_over(root, set(NAMES)), "movr_all's spans are spread over the three nodes")
        workload.start()
        writes.start()
        coordinator = status(root)["coordinator"]
        second, last = [n for n in NAMES if n != coordinator][0], [n for n in NAMES if n != coordinator][1]

        # movr.promos declared everywhere, then added to the feed: the coordinator first, a second node, the last
        project = root / "project.yml"
        project.write_text(
            project.read_text().replace(
                "        locality: region=us-east1\nvars:", "        locality: region=us-east1\n" + PROMOS + "vars:"
            )
        )
        assert "promos" in project.read_text()
        for name in NAMES:
            deploy(root, copies[name], "project.yml")
        feeds = root / "feeds/movr.yml"
        feeds.write_text(
            feeds.read_text().replace(
                "tables: [movr.users, movr.vehicles, movr.rides]",
                "tables: [movr.users, movr.vehicles, movr.rides, movr.promos]",
            )
        )
        for name in (coordinator, second):
            deploy(root, copies[name], "feeds/movr.yml")
        wait_for(lambda: f"{last} has another copy" in logs(root), "the coordinator waits for the last node")
        assert "promos added" not in logs(root) and "dropped" not in logs(root)
        assert "does not declare" not in logs(root) and all(node.alive() for node in nodes.values())
        deploy(root, copies[last], "feeds/movr.yml")
        wait_for(lambda: "movr.promos added at version" in logs(root), "the job takes the table")
        wait_for(
            spread_over(root, set(NAMES), tables={"movr.users", "movr.vehicles", "movr.rides", "movr.promos"}),
            "movr.promos's spans are spread over the three nodes",
        )
        committed = time.time_ns()
        wait_for(high_water_past(root, committed), "the high-water mark passes the table's addition")

        # movr.promos dropped and `diff` turned off, deployed the other way round: the coordinator last
        feeds.write_text(feeds.read_text().replace(", movr.promos]", "]").replace("      diff: true\n", ""))
        for name in (last, second):
            deploy(root, copies[name], "feeds/movr.yml")
        pending, deployed = "differs from revision 2 of job", time.time_ns()
        wait_for(
            lambda: all(pending in (root / f"{n}.log").read_text() for n in (last, second)),
            "two nodes have the change and wait for the coordinator's copy",
        )
        wait_for(high_water_past(root, deployed), "the coordinator checkpoints past the deploy, taking none of it")
        assert "dropped: no longer emitted" not in logs(root)
        writes.stop.set()
        writes.join()
        # A dropped table is emitted up to the last batch cut when the job takes the drop: the last writes are
        # emitted before the coordinator has the change, so that the sink holds the whole table.
        wait_for(high_water_past(root, time.time_ns()), "the high-water mark passes the table's last write")
        deploy(root, copies[coordinator], "feeds/movr.yml")
        wait_for(lambda: "movr.promos dropped: no longer emitted" in logs(root), "the job drops the table")
        assert "takes diff: true → false in place" in logs(root)
        workload.stop.set()
        workload.join()
        committed = time.time_ns()
        wait_for(high_water_past(root, committed), "the high-water mark passes the workload")
        assert all(node.alive() for node in nodes.values()), "no node exited"
        assert logs(root).count("movr.promos added at version") == 1
    finally:
        workload.stop.set()
        writes.stop.set()
        codes = {name: node.stop() for name, node in nodes.items()}
    assert codes == {name: 0 for name in NAMES}
    assert workload.error is None and writes.error is None and writes.commits > 10
    reports = verify_all(root, ["movr_all"])
    assert all(r["ok"] for r in reports), reports
    table = DeltaTable(str(promos)).to_pyarrow_table().to_pylist()
    assert sink_rows(root, "promos") == {(row["code"],): row for row in table}, "every row of the added table"


# Nodes with copies of their own are hosts of their own: PostgreSQL's store (`make soak` plays rollouts on
# SQLite too, `bench/nemesis.py --nodes --changes`).
@pytest.mark.parametrize("demo_project", ["postgresql"], indirect=True)
def test_jobs_started_while_the_nodes_follow_are_taken_up_at_once_and_keep_the_copy_they_were_made_from(demo_project):
    """The new job is made from a copy of the project that adds movr.rides to the feed, before the nodes have
    it: every node agrees on the copy they loaded earlier, and the job must keep its own until they have it,
    not drop the table it scans."""
    root = demo_project
    assert Cli(root)("workload", "init", "movr").exit_code == 0
    feeds = root / "feeds/movr.yml"
    with_rides = feeds.read_text()
    feeds.write_text(
        with_rides.replace("tables: [movr.users, movr.vehicles, movr.rides]", "tables: [movr.users, movr.vehicles]")
    )
    with_absolute_paths(root)  # the job made here has the nodes' definition
    with_rides = feeds.read_text().replace(
        "tables: [movr.users, movr.vehicles]", "tables: [movr.users, movr.vehicles, movr.rides]"
    )
    copies = {name: node_copy(root, name) for name in NAMES}
    nodes = {
        name: Runner(copies[name], root / f"{name}.log", poll_interval=0.5, node_id=name, feeds=("movr_all",))
        for name in NAMES
    }
    workload = Workload(load_project(root)[0], 600, 4, seed=5)
    try:
        wait_for(
            spread_over(root, set(NAMES), tables={"movr.users", "movr.vehicles"}),
            "movr_all's spans are spread over the three nodes",
        )
        workload.start()
        cli = Cli(root)
        wait_for(high_water_past(root, 0), "the job's initial scan is emitted")
        first = status(root)["job_id"]
        assert cli("cancel", "movr_all").exit_code == 0
        feeds.write_text(with_rides)
        created = cli("run", "--new-job", "--continue", "--scan-table", "movr.rides", "-s", "movr_all")
        assert created.exit_code == 0, created.output
        assert "run by the --follow nodes n0, n1, n2" in created.output, "left to the nodes following the feed"
        started = time.monotonic()
        record = wait_for(
            lambda: (r := status(root))["job_id"] != first and r["coordinator"] and r,
            "the new job has a coordinator",
            60,
        )
        print(f"new job coordinated {time.monotonic() - started:.1f} s after `run --new-job`")
        assert record["coordinator"] in NAMES
        wait_for(spread_over(root, set(NAMES)), "the new job's spans are spread over the three nodes")
        # each node says so once it has started its part, which may be a moment after its spans are placed
        wait_for(
            lambda: all(
                f"job {record['job_id']} runs; this node takes its part" in (root / f"{n}.log").read_text()
                for n in NAMES
            ),
            "every node says it takes its part of the new job",
            60,
        )
        wait_for(
            lambda: "made from another copy of the project after n0, n1, n2 loaded" in logs(root),
            "the coordinator keeps the job's copy, newer than the nodes'",
        )
        for name in NAMES:
            deploy(root, copies[name], "feeds/movr.yml")
        deployed = time.time_ns()
        wait_for(high_water_past(root, deployed), "the job goes on past the deploy")
        assert "dropped" not in logs(root) and "takes revision" not in logs(root), "the job kept its copy"

        assert cli("pause", "movr_all").exit_code == 0
        wait_for(lambda: status(root)["coordinator"] is None or status(root)["status"] == "paused", "paused")
        assert cli("resume", "movr_all").exit_code == 0
        resumed = time.time_ns()
        started = time.monotonic()
        wait_for(lambda: status(root)["coordinator"], "the resumed job has a coordinator", 60)
        print(f"resumed job coordinated {time.monotonic() - started:.1f} s after `resume`")
        wait_for(high_water_past(root, resumed), "the resumed job's high-water mark moves")
        workload.stop.set()
        workload.join()
        committed = time.time_ns()
        wait_for(high_water_past(root, committed), "the high-water mark passes the workload")
        assert [r["status"] for r in json_lines(Cli(root)("jobs", "--all", "--json").stdout)] == ["canceled", "running"]
    finally:
        workload.stop.set()
        codes = {name: node.stop() for name, node in nodes.items()}
    assert codes == {name: 0 for name in NAMES}
    assert workload.error is None
    reports = verify_all(root, ["movr_all"])
    assert all(r["ok"] for r in reports), reports
    rides = DeltaTable(str(root / "target/warehouse/movr/rides")).to_pyarrow_table().to_pylist()
    assert {key: after["end_address"] for key, after in sink_rows(root, "rides").items()} == {
        (row["city"], row["id"]): row["end_address"] for row in rides
    }, "every ride, scanned, then followed"
