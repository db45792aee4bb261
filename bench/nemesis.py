"""Randomized fault schedules against real `feedctl run` processes, each run checked by `feedctl verify`.

    .venv/bin/python bench/nemesis.py --runs 100 --seed 1
    .venv/bin/python bench/nemesis.py --nodes --store postgresql --runs 100 --seed 1
    .venv/bin/python bench/nemesis.py --sink-faults --runs 30 --seed 1

Run i plays the schedule of seed S+i (kills at fault points or random instants, pauses and resumes, bursts
and idle periods of the movr workload over three tables and three feeds, two of them CDC queries), then
catches up and verifies every feed. With `--nodes`, run i plays three nodes sharing the state store (SQLite,
or a private PostgreSQL server with `--store postgresql`) struck by kills, SIGSTOP/SIGCONT, drains and joins
(`feedctl.testing.nemesis.nodes`). With `--sink-faults`, movr_all writes to a Kafka broker, SIGKILLed in most
rounds and started again 2-25 s later (`feedctl.testing.nemesis.sink_faults`). Prints one row per run;
exits 1 on any violation, with the command that replays the failing run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from feedctl.testing.nemesis.harness import play  # noqa: E402
from feedctl.testing.nemesis.nodes import make_node_schedule, play_nodes  # noqa: E402
from feedctl.testing.nemesis.schedule import make_schedule  # noqa: E402

FEEDS = ["movr_all", "vehicles_in_use", "ride_ends"]


def one_run(
    seed: int,
    rounds: int,
    keep: bool,
    several_nodes: bool = False,
    store: str = "sqlite",
    changes: bool = False,
    sink_faults: bool = False,
):
    with tempfile.TemporaryDirectory(prefix=f"feedctl-nemesis-{seed}-") as tmp:
        if not several_nodes:
            outcome = play(REPO, Path(tmp), make_schedule(seed, rounds, FEEDS, sink_faults))
        elif store == "postgresql":
            from feedctl.testing.postgres import postgres

            with postgres() as server:
                outcome = play_nodes(REPO, Path(tmp), make_node_schedule(seed, rounds + 1, changes), server.url)
        else:
            outcome = play_nodes(REPO, Path(tmp), make_node_schedule(seed, rounds + 1, changes))
        if outcome.violations and keep:
            shutil.copytree(tmp, f"{tmp}-kept")
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="runner processes per run (each may be killed)")
    parser.add_argument("--keep", action="store_true", help="keep the project folder of a run with violations")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once (rounds spend most time waiting)")
    parser.add_argument(
        "--nodes",
        action="store_true",
        help="three nodes struck by kills, pauses and drains (faults per run: --rounds + 1)",
    )
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite", help="with --nodes")
    parser.add_argument(
        "--changes",
        action="store_true",
        help="with --nodes: each node with its own copy of the "
        "project; a table added and one dropped in place, deployed at different moments, and a "
        "job continued by a new one while the nodes follow",
    )
    parser.add_argument(
        "--sink-faults",
        action="store_true",
        help="movr_all into a Kafka broker, SIGKILLed in most rounds and started again seconds later",
    )
    args = parser.parse_args()
    if args.sink_faults and args.nodes:
        parser.error("--sink-faults plays over one runner: leave out --nodes")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    header = (
        f"{'run':>4} {'seed':>8} {'kills':>5} {'pauses':>6} {'commits':>7} {'messages':>8} "
        f"{'violations':>10} {'seconds':>7}  schedule"
    )
    print(header, flush=True)
    failed, totals = [], {"kills": 0, "pauses": 0, "sink_outages": 0, "commits": 0, "messages": 0}
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.parallel) as pool:
        futures = {
            pool.submit(
                one_run, args.seed + i, args.rounds, args.keep, args.nodes, args.store, args.changes, args.sink_faults
            ): i
            for i in range(args.runs)
        }
        for future in as_completed(futures):
            outcome = future.result()
            messages = sum(r.messages for r in outcome.reports.values())
            totals["kills"] += outcome.kills
            totals["pauses"] += outcome.pauses
            totals["sink_outages"] += outcome.sink_outages
            totals["commits"] += outcome.commits
            totals["messages"] += messages
            print(
                f"{futures[future] + 1:>4} {outcome.seed:>8} {outcome.kills:>5} {outcome.pauses:>6} "
                f"{outcome.commits:>7} {messages:>8} {outcome.violations:>10} {outcome.seconds:>7.0f}  "
                f"{outcome.schedule.describe()}",
                flush=True,
            )
            if outcome.violations:
                failed.append(outcome.seed)
                for problem in outcome.problems:
                    print(f"     {problem}")
                for report in outcome.reports.values():
                    if not report.ok:
                        print("\n".join("     " + line for line in report.lines()))
    minutes = (time.monotonic() - started) / 60
    print(
        f"nemesis: {args.runs} runs, {totals['kills']} kills, {totals['pauses']} pauses, "
        + (f"{totals['sink_outages']} sink outages, " if args.sink_faults else "")
        + f"{totals['commits']} "
        f"commits, {totals['messages']} messages verified, {len(failed)} runs with violations "
        f"({minutes:.1f} min, seed {args.seed})"
    )
    for seed in sorted(failed):
        extra = (f" --nodes --store {args.store}" + (" --changes" if args.changes else "")) if args.nodes else ""
        extra += " --sink-faults" if args.sink_faults else ""
        print(f"replay: .venv/bin/python bench/nemesis.py --runs 1 --seed {seed} --rounds {args.rounds}{extra}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
