"""Several nodes over one project and one state store: exactly one job per feed however they start, and a
coordinator killed with its JVM is replaced by another node, which continues from the last checkpoint;
`feedctl verify` is clean on every feed afterwards."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from feedctl.testing.nemesis.harness import Runner
from support import Cli, json_lines

FEEDS = {"movr_all", "vehicles_in_use", "ride_ends"}


def records(root: Path, command: str) -> list[dict]:
    result = Cli(root)(command, "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)


def wait_for(condition, what: str, timeout: float = 240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")


def test_nodes_started_together_make_one_job_per_feed_and_a_killed_coordinator_is_replaced(demo_project):
    root = demo_project
    assert Cli(root)("workload", "init", "movr").exit_code == 0
    nodes = {f"n{i}": Runner(root, root / f"n{i}.log", poll_interval=0.5, node_id=f"n{i}") for i in range(3)}
    try:
        def every_feed_coordinated():
            jobs = records(root, "jobs")
            running = [j for j in jobs if j["status"] == "running" and j["coordinator_live"]]
            return jobs if {j["feed"] for j in running} == FEEDS else None

        jobs = wait_for(every_feed_coordinated, "every feed has a job run by a live node")
        assert Counter(j["feed"] for j in jobs) == Counter(FEEDS), "exactly one job per feed"
        def three_live():
            live = [n for n in records(root, "nodes") if n["live"]]
            return live if len(live) == 3 else None

        members = wait_for(three_live, "three nodes are live")
        assert {n["node_id"] for n in members} == {"n0", "n1", "n2"}
        assert sum(n["jobs_coordinated"] for n in members) == 3

        victim = max(members, key=lambda n: n["jobs_coordinated"])["node_id"]
        nodes[victim].kill()
        killed_at = time.time()

        def taken_over():
            return len([j for j in records(root, "jobs") if j["coordinator_live"]
                        and not j["coordinator"].startswith(victim + "/")]) == len(FEEDS)

        wait_for(taken_over, "another node coordinates every job")
        print(f"failover: every job coordinated by a live node {time.time() - killed_at:.1f} s after the kill")
        # resolved timestamps advance again, past the kill, written by the new coordinator
        wait_for(lambda: all(int((j["resolved_timestamp"] or "0").split(".")[0]) > killed_at * 1e9
                             for j in records(root, "jobs") if j["feed"] == "movr_all"),
                 "movr_all's resolved timestamp passes the moment of the kill")
        print(f"failover: movr_all resolved past the kill {time.time() - killed_at:.1f} s after it")
        assert {r["node_id"]: r["live"] for r in records(root, "nodes")}[victim] is False

        assert Cli(root)("workload", "run", "movr", "--duration", "3s").exit_code == 0
        committed = time.time_ns()
        wait_for(lambda: all(j["high_water_timestamp"] and int(j["high_water_timestamp"].split(".")[0]) > committed
                             for j in records(root, "jobs") if j["status"] == "running"),
                 "every job's high-water mark passes the workload")
    finally:
        codes = {name: node.stop() for name, node in nodes.items()}
    assert [c for name, c in codes.items() if name != victim] == [0, 0]
    for feed in sorted(FEEDS):
        result = Cli(root)("verify", feed, "--json")
        assert result.exit_code == 0, result.output
    left = {r["node_id"] for r in records(root, "nodes")}
    assert left == {victim}, "nodes deregister on a clean exit; the killed one stays, not live"
