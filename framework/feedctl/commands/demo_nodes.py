"""`make run-nodes`: the movr demo on three nodes in two regions, in the project at the current directory.

Start three `feedctl run --follow` processes (two in us-east1, one in us-west1) sharing the project's state
store, commit workload while they run, print where each span of each job runs and why, then drain the nodes
with SIGTERM and print what `feedctl verify` finds of every feed.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from feedctl.commands.nodes import node_records, spans_cell
from feedctl.commands.status import job_status
from feedctl.compiler.compile import compile_project
from feedctl.project.loader import load_project
from feedctl.state.jobs import JobError
from feedctl.testing.nemesis.harness import Runner
from feedctl.verify.feed import verify_feed
from feedctl.workload.movr import init_movr, run_movr

NODES = {"e1a": "region=us-east1,zone=a", "e1b": "region=us-east1,zone=b", "w1": "region=us-west1,zone=a"}


def _placed(project_dir: Path, feeds: list[str]) -> bool:
    """Every feed has a job whose spans are all on live nodes."""
    try:
        records = [job_status(project_dir, feed) for feed in feeds]
    except JobError:  # no job yet
        return False
    return all(r["spans"] and all(s["node_live"] and not s["moving_to"] for s in r["spans"]) for r in records)


def _passed(project_dir: Path, feeds: list[str], ns: int) -> bool:
    marks = [job_status(project_dir, feed)["high_water_timestamp"] for feed in feeds]
    return all(m and int(m.split(".")[0]) > ns for m in marks)


def _until(condition, nodes: dict[str, Runner], timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or not all(n.alive() for n in nodes.values()):
            print("the nodes did not get there in time; see target/<node>.log")
            return False
        time.sleep(1)
    return True


def main(project_dir: str = ".", seconds: float = 10) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = Path(project_dir).resolve()
    project, _ = load_project(root)
    init_movr(project)
    feeds = sorted(f for f, c in compile_project(root).feeds.items() if c.feed.sink is not None)
    (root / "target").mkdir(exist_ok=True)
    nodes = {
        node: Runner(root, root / "target" / f"{node}.log", poll_interval=0.5, node_id=node, locality=where)
        for node, where in NODES.items()
    }
    print(
        f"started {len(nodes)} nodes: "
        + ", ".join(f"{n} ({w})" for n, w in NODES.items())
        + "; logs in target/<node>.log",
        flush=True,
    )
    try:
        if not _until(lambda: _placed(root, feeds), nodes):
            return 1
        stats = run_movr(project, duration=seconds, rate=5)
        committed = time.time_ns()
        print(
            f"workload: {stats.commits} commits in {stats.seconds:.0f}s; waiting for every job's high-water "
            "mark to pass them",
            flush=True,
        )
        if not _until(lambda: _passed(root, feeds, committed), nodes):
            return 1
        print()
        for record in node_records(root):
            print(f"node {record['node_id']} ({record['locality']}): {spans_cell(record)}")
        for feed in feeds:
            record = job_status(root, feed)
            print(f"\n{feed}: job {record['job_id']}, coordinated by {record['coordinator']}")
            for s in record["spans"]:
                print(
                    f"  {s['table']:<14} span {s['span']:<3} home {s['home'] or '-':<22} node {s['node']:<4} "
                    f"({s['reason']})"
                )
    finally:
        for node in nodes.values():  # SIGTERM drains: the batch in flight, then its spans go
            if node.alive():
                node.proc.send_signal(signal.SIGTERM)
        for node in nodes.values():
            node.stop()
    print()
    failed = False
    for feed in feeds:
        check = verify_feed(root, feed)
        print(
            f"feedctl verify {feed}: {'OK' if check.ok else 'FAILED'} ({check.messages} messages against "
            f"{check.expected} changes in the tables' history)"
        )
        failed |= not check.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
