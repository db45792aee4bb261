"""The PostgreSQL state store restarted under three `--follow` nodes while the workload commits: stopped at
once (SIGQUIT, an immediate shutdown: every session cut, recovery at start), away for longer than any count of
retries lasts, then started again on its data. Each node waits for it and says so in a few lines; no node
exits, no job fails or pauses, and once the store is back every job catches up by itself and every feed
verifies clean."""

from __future__ import annotations

import signal
import time

from feedctl.project.loader import load_project
from feedctl.testing.nemesis.harness import Runner, Workload
from feedctl.testing.postgres import postgres
from support import Cli, copy_demo_project
from support.nodes import records, verify_all, wait_for

FEEDS = {"movr_all", "vehicles_in_use", "ride_ends"}
NAMES = ["n0", "n1", "n2"]
AWAY = 20.0  # seconds: forty times a node's first wait (its poll interval)
MOST_LINES = 200  # what a node may write while the store is away


def high_water_ns(job: dict) -> int:
    return int((job["high_water_timestamp"] or "0").split(".")[0])


def test_a_state_store_restarted_under_three_nodes_is_waited_out_and_loses_nothing(tmp_path):
    server = postgres()
    try:
        root = copy_demo_project(tmp_path / "demo")
        project = root / "project.yml"
        project.write_text(project.read_text().replace("state: sqlite:///target/state.db", f"state: {server.url}"))
        codes, told = follow_through_a_restart(root, server)
        judge(root, codes, told)
    finally:
        server.stop()


def follow_through_a_restart(root, server) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Three nodes following while the workload commits and the store restarts: how each exited, and the lines
    each wrote while the store was away."""
    assert Cli(root)("workload", "init", "movr").exit_code == 0
    nodes = {n: Runner(root, root / f"{n}.log", poll_interval=0.5, node_id=n) for n in NAMES}
    workload = Workload(load_project(root)[0], 600, 5, seed=7)
    try:
        started = time.time_ns()
        wait_for(
            lambda: (
                (j := [j for j in records(root, "jobs") if j["status"] == "running"])
                and {x["feed"] for x in j} == FEEDS
                and all(high_water_ns(x) > started for x in j)
            ),
            "every feed has a job whose high-water mark moves",
            timeout=300,
        )
        wait_for(lambda: len([n for n in records(root, "nodes") if n["live"]]) == 3, "three nodes are live")
        before = {n: len((root / f"{n}.log").read_text().splitlines()) for n in NAMES}
        workload.start()

        server.restart(signal.SIGQUIT, away=AWAY)
        told = {n: (root / f"{n}.log").read_text().splitlines()[before[n] :] for n in NAMES}
        assert all(node.alive() for node in nodes.values()), {n: t[-20:] for n, t in told.items()}

        time.sleep(5)  # the workload commits with the store back too
        workload.stop.set()
        workload.join()
        assert workload.error is None, workload.error
        committed = time.time_ns()
        wait_for(
            lambda: (
                (j := [j for j in records(root, "jobs") if j["feed"] in FEEDS])
                and all(high_water_ns(x) > committed for x in j)
            ),
            "every job's high-water mark passes the workload",
            timeout=180,
        )
        jobs = records(root, "jobs")
        assert sorted(j["feed"] for j in jobs) == sorted(FEEDS), jobs  # no job ended, none made anew
        assert {j["status"] for j in jobs} == {"running"} and not any(j["error"] for j in jobs), jobs
        assert all(node.alive() for node in nodes.values())
    finally:
        workload.stop.set()
        codes = {n: node.stop() for n, node in nodes.items()}
    return codes, told


def judge(root, codes: dict[str, int], told: dict[str, list[str]]) -> None:
    """Every node exited cleanly, said the outage in a few lines and its end, and every feed verifies."""
    assert codes == dict.fromkeys(NAMES, 0), {n: (root / f"{n}.log").read_text()[-2000:] for n in NAMES}
    for n, lines in told.items():
        assert len(lines) <= MOST_LINES, f"{n}: {len(lines)} lines while the store was away:\n" + "\n".join(lines[-40:])
        assert any("every feed of this node waits" in line for line in lines), (n, lines[-40:])
        said = (root / f"{n}.log").read_text()
        assert "the state store works again after" in said, (n, said[-3000:])
    reports = verify_all(root, FEEDS)
    assert len(reports) == len(FEEDS) and all(r["ok"] for r in reports), reports
