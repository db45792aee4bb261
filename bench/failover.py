"""Failover over real node processes: three `feedctl run --follow` nodes share a state store while the movr
workload commits; the node coordinating movr_all is SIGKILLed with its JVM, again and again. For each kill:

- coordinator: seconds from the kill until another node writes movr_all's next resolved timestamp (resolved
  timestamps advance again);
- spans: seconds from the kill until every span the dead node held emits a batch on another node (placed:
  until the last of them was placed on another node, the rest is that node's batch);
- caught up: seconds from the kill until a resolved timestamp past the instant of the kill is written (the
  failover plus the lag the feed had);
- lag: how far movr_all's high-water mark was behind at the kill.

Nodes run with the default settings (a poll every second, a liveness TTL of 6 s) and every feed of the demo
project, or those `--feeds` names (movr_all always). The dead node is restarted under its id after each kill,
and the next kill waits until the spans are spread over the three nodes again and every span has emitted
since (the restarted node's Spark session is up). Prints one row per kill, then p50 and p99 of each.

    .venv/bin/python bench/failover.py --kills 20
    .venv/bin/python bench/failover.py --kills 20 --feeds movr_all
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from latency import percentile  # noqa: E402

from feedctl.project.loader import load_project  # noqa: E402
from feedctl.state import jobs, nodes, spans  # noqa: E402
from feedctl.state.store import StateStore  # noqa: E402
from feedctl.testing.nemesis.harness import Runner, Workload, feedctl, make_project  # noqa: E402

FEED = "movr_all"
FEEDS = ("movr_all", "vehicles_in_use", "ride_ends")
NAMES = ["n0", "n1", "n2"]


def wait_for(condition, timeout: float = 300.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError(f"condition not met after {timeout:.0f} s")


class Watch:
    """movr_all's job and spans, read straight from the state store."""

    def __init__(self, store: StateStore):
        self.store = store

    def job(self) -> jobs.Job | None:
        with self.store.transaction() as conn:
            return jobs.newest_job(conn, FEED)

    def spans(self) -> list[spans.Span]:
        job = self.job()
        if job is None:
            return []
        with self.store.transaction() as conn:
            return spans.of_job(conn, job.job_id)

    def spread(self) -> bool:
        found = self.spans()
        return bool(found) and {s.node for s in found} == set(NAMES) and not any(s.moving_to for s in found)

    def settle(self) -> None:
        """Until the spans are spread over the three nodes and the high-water mark has passed the moment
        they were: every node, a restarted one too, emits its spans."""
        wait_for(self.spread)
        since = time.time_ns()
        wait_for(lambda: self.job().high_water.wall > since)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rate", type=float, default=5.0, help="workload commits per second")
    parser.add_argument("--keep", action="store_true", help="keep the project folder, with each node's log")
    parser.add_argument(
        "--feeds", nargs="+", default=list(FEEDS), choices=FEEDS, help="the feeds the nodes run (default: all three)"
    )
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    times: dict[str, list[float]] = {"coordinator": [], "spans": [], "placed": [], "caught_up": []}
    folder = (
        contextlib.nullcontext(tempfile.mkdtemp(prefix="feedctl-failover-"))
        if args.keep
        else tempfile.TemporaryDirectory(prefix="feedctl-failover-")
    )
    with folder as tmp:
        if args.keep:
            print(f"project and node logs: {tmp}/project", flush=True)
        root = make_project(REPO, Path(tmp) / "project")
        subprocess.run(feedctl(root, "workload", "init", "movr"), check=True, capture_output=True)
        feeds = tuple(dict.fromkeys([FEED, *args.feeds]))

        def node(name: str) -> Runner:
            return Runner(root, root / f"{name}.log", poll_interval=1.0, node_id=name, feeds=feeds)

        runners = {name: node(name) for name in NAMES}
        workload = Workload(load_project(root)[0], 24 * 3600, args.rate, seed=1)
        store = StateStore.of_project(load_project(root)[0])
        watch = Watch(store)
        print(
            f"{'kill':>4} {'victim':>6} {'coordinator_s':>13} {'spans_s':>8} {'placed_s':>8} {'caught_up_s':>11} "
            f"{'spans_moved':>11} {'lag_s':>6}",
            flush=True,
        )
        try:
            workload.start()
            watch.settle()
            for kill in range(1, args.kills + 1):
                job = watch.job()
                victim = nodes.node_of(job.coordinator)
                held = {s.key: s.batch_seq for s in watch.spans() if s.node == victim}
                runners[victim].kill()
                killed = time.time()
                job = watch.job()  # read after the kill: what the dead node wrote last
                lag = f"{killed - job.high_water.wall / 1e9:.1f}" if job.high_water.wall else "-"

                def resolved_elsewhere():
                    j = watch.job()
                    return j.resolved > job.resolved and nodes.node_of(j.coordinator) != victim

                def caught_up():
                    return watch.job().resolved.wall > killed * 1e9

                def spans_resumed():
                    now = {s.key: s for s in watch.spans()}
                    return all(now[k].node != victim and now[k].batch_seq > b for k, b in held.items())

                checks = {"coordinator": resolved_elsewhere, "spans": spans_resumed, "caught_up": caught_up}
                done: dict[str, float] = {}

                def both():
                    for name, check in checks.items():
                        if name not in done and check():
                            done[name] = time.time() - killed
                    return len(done) == len(checks)

                wait_for(both)
                placed = max(s.assigned_at for s in watch.spans() if s.key in held) - killed
                for name, seconds in {**done, "placed": placed}.items():
                    times[name].append(seconds)
                print(
                    f"{kill:>4} {victim:>6} {done['coordinator']:>13.1f} {done['spans']:>8.1f} {placed:>8.1f} "
                    f"{done['caught_up']:>11.1f} {len(held):>11} {lag:>6}",
                    flush=True,
                )
                runners[victim] = node(victim)
                watch.settle()
        finally:
            workload.stop.set()
            codes = [runner.stop() for runner in runners.values()]
            store.close()
        for name, values in times.items():
            if values:
                print(
                    f"{name}: p50 {statistics.median(values):.1f} s, p99 {percentile(values, 99):.1f} s, "
                    f"max {max(values):.1f} s over {len(values)} kills"
                )
        if workload.error is not None:
            print(f"workload failed: {workload.error}")
            return 1
        for feed in feeds:
            verdict = subprocess.run(feedctl(root, "verify", feed), capture_output=True, text=True)
            print(f"verify {feed}: {'OK' if verdict.returncode == 0 else 'FAILED'}")
            if verdict.returncode != 0:
                print(verdict.stdout[-2000:])
                return 1
        return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
