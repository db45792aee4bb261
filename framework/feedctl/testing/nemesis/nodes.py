"""The nemesis over several nodes: three `feedctl run --follow` processes share one state store while the
movr workload commits, and a schedule drawn from a seed strikes them: a node (often the coordinator of a
job) SIGKILLed with its JVM, SIGSTOPped for a while (past the liveness TTL or not) then SIGCONTed, or
drained with SIGTERM; a node killed or drained joins again later under its id. The run ends with every node
stopped cleanly, a catch-up, and `verify` of every feed."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from feedctl.state import jobs, nodes
from feedctl.state.store import StateStore
from feedctl.testing.nemesis.harness import Outcome, Runner, Workload, judge, make_project

NAMES = ("n0", "n1", "n2")
ACTIONS = ("kill", "kill", "pause", "drain")


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the workload starts
    action: str  # kill | pause | drain
    coordinator: bool  # strike the node coordinating the first job (else a node drawn at random)
    hold: float  # pause: seconds stopped; kill and drain: seconds before the node joins again


@dataclass(frozen=True)
class NodeSchedule:
    seed: int
    batch_rows: int
    file_size: str
    seconds: float  # of workload
    rate: float
    faults: tuple[Fault, ...]

    def describe(self) -> str:
        return ", ".join(f"{f.action}{'(coordinator)' if f.coordinator else ''}@{f.at:.0f}s" for f in self.faults)


def make_node_schedule(seed: int, faults: int = 3) -> NodeSchedule:
    rng = random.Random(seed)
    seconds = rng.uniform(30, 45)
    times = sorted(rng.uniform(3, seconds - 5) for _ in range(faults))
    out = tuple(Fault(round(t, 1), rng.choice(ACTIONS), rng.random() < 0.5, round(rng.uniform(2, 14), 1))
                for t in times)
    return NodeSchedule(seed, rng.choice([10, 100, 10_000]), rng.choice(["2KiB", "64KiB", "16MiB"]),
                        round(seconds, 1), rng.choice([2.0, 5.0]), out)


def _joined(store: StateStore, runners: dict[str, Runner]) -> list[str]:
    """The nodes whose process is running and registered: one still starting has nothing to drain yet, and
    dies of a SIGTERM as any process does before it sets its handlers."""
    with store.transaction() as conn:
        registered = {(n.node_id, n.pid) for n in nodes.list_nodes(conn)}
    return [name for name, runner in runners.items() if runner.alive() and (name, runner.proc.pid) in registered]


def _coordinator(store: StateStore) -> str | None:
    with store.transaction() as conn:
        running = [j for j in jobs.list_jobs(conn) if j.status == "running" and j.coordinator]
    return nodes.node_of(running[0].coordinator) if running else None


def play_nodes(template: Path, workdir: Path, schedule: NodeSchedule, state_url: str | None = None) -> Outcome:
    """A whole run over three nodes; `state_url` puts the state store elsewhere than the project's SQLite."""
    from feedctl.project.loader import load_project
    from feedctl.workload.movr import init_movr

    started = time.monotonic()
    outcome = Outcome(schedule.seed, schedule)
    root = make_project(template, workdir / "project", schedule.batch_rows, schedule.file_size)
    if state_url:
        project_file = root / "project.yml"
        project_file.write_text(project_file.read_text().replace("sqlite:///target/state.db", state_url))
    project, _ = load_project(root)
    init_movr(project, rows=30, seed=schedule.seed)
    store = StateStore.of_project(project)
    rng = random.Random(schedule.seed)
    logs = {name: workdir / f"{name}.log" for name in NAMES}
    runners = {name: Runner(root, logs[name], poll_interval=0.5, node_id=name) for name in NAMES}
    returns: list[tuple[float, str]] = []  # (when, node): killed or drained nodes joining again
    workload = Workload(project, schedule.seconds, schedule.rate, schedule.seed)
    try:
        workload.start()
        began = time.monotonic()
        for fault in schedule.faults:
            while time.monotonic() - began < fault.at:
                _rejoin(root, runners, logs, returns, time.monotonic() - began)
                time.sleep(0.1)
            up = _joined(store, runners)
            target = _coordinator(store) if fault.coordinator else None
            target = target if target in up else (rng.choice(up) if up else None)
            if target is None:
                continue
            if fault.action == "kill":
                runners[target].kill()
                outcome.kills += 1
                returns.append((fault.at + fault.hold, target))
            elif fault.action == "pause":
                runners[target].pause()
                time.sleep(fault.hold)
                runners[target].resume()
                outcome.pauses += 1
            else:
                code = runners[target].stop()
                if code != 0:
                    outcome.problems.append(f"node {target} drained with SIGTERM exited {code}")
                returns.append((fault.at + fault.hold, target))
        workload.join()
        while returns:
            _rejoin(root, runners, logs, returns, float("inf"))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(_joined(store, runners)) < sum(r.alive() for r in runners.values()):
            time.sleep(0.2)
    finally:
        workload.stop.set()
        codes = {name: runner.stop() for name, runner in runners.items() if runner.alive()}
        store.close()
    outcome.problems.extend(f"node {n} exited {c} when stopped" for n, c in codes.items() if c != 0)
    outcome.commits = workload.commits
    if workload.error:
        outcome.problems.append(f"workload: {workload.error}")
    return judge(root, project, workdir / "catch-up.log", outcome, started)


def _rejoin(root: Path, runners: dict[str, Runner], logs, returns: list[tuple[float, str]], now: float) -> None:
    """Start again, under their ids, the nodes whose time to join has come."""
    for entry in sorted(returns):
        when, name = entry
        if when <= now:
            returns.remove(entry)
            runners[name] = Runner(root, logs[name], poll_interval=0.5, node_id=name)
