"""The nemesis over several nodes: three `feedctl run --follow` processes share one state store while the
movr workload commits, and a schedule drawn from a seed strikes them: a node (often the coordinator of a
job) SIGKILLed with its JVM, SIGSTOPped for a while (past the liveness TTL or not) then SIGCONTed, or
drained with SIGTERM; a node killed or drained joins again later under its id. With `changes`, each node
has its own copy of the project, and two more faults strike: a table added to `movr_all` in place (which
starts without `movr.rides`), then one dropped, the feed file deployed to the nodes one by one at random
moments; and `movr_all`'s job canceled and continued by `run --new-job --continue` while the nodes follow.
The run ends with every node stopped cleanly, a catch-up, and `verify` of every feed (and of the sink across
a feed's jobs)."""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from feedctl.state import jobs, nodes
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore
from feedctl.testing.nemesis.harness import (
    Outcome,
    Runner,
    Workload,
    deploy,
    feedctl,
    judge,
    make_project,
    node_copy,
    with_absolute_paths,
)

NAMES = ("n0", "n1", "n2")
ACTIONS = ("kill", "kill", "pause", "drain")
CHANGES = ("table", "table", "new_job")  # with `changes`: rides added, then users dropped; a job continued
FEED_FILE = "feeds/movr.yml"
_EDITING = threading.Lock()  # the root's feed file is edited, or read by `run --new-job`, by one change at a time


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the workload starts
    action: str  # kill | pause | drain | table | new_job
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
    changes: bool = False  # nodes with copies of their own; tables added and dropped, jobs continued

    def describe(self) -> str:
        return ", ".join(f"{f.action}{'(coordinator)' if f.coordinator else ''}@{f.at:.0f}s" for f in self.faults)


def make_node_schedule(seed: int, faults: int = 3, changes: bool = False) -> NodeSchedule:
    rng = random.Random(seed)
    seconds = rng.uniform(30, 45)
    times = sorted(rng.uniform(3, seconds - 5) for _ in range(faults))
    out = tuple(
        Fault(round(t, 1), rng.choice(ACTIONS), rng.random() < 0.5, round(rng.uniform(2, 14), 1)) for t in times
    )
    if changes:  # one of each, at moments of their own
        out = tuple(
            sorted(
                out
                + tuple(
                    Fault(round(rng.uniform(5, seconds - 5), 1), action, False, round(rng.uniform(0, 8), 1))
                    for action in CHANGES
                ),
                key=lambda f: f.at,
            )
        )
    return NodeSchedule(
        seed,
        rng.choice([10, 100, 10_000]),
        rng.choice(["2KiB", "64KiB", "16MiB"]),
        round(seconds, 1),
        rng.choice([2.0, 5.0]),
        out,
        changes,
    )


def _joined(store: StateStore, runners: dict[str, Runner]) -> list[str]:
    """The nodes whose process is running and registered: one still starting has nothing to drain yet, and
    dies of a SIGTERM as any process does before it sets its handlers."""
    with store.transaction() as conn:
        registered = {(n.node_id, n.pid) for n in nodes.list_nodes(conn)}
    return [name for name, runner in runners.items() if runner.alive() and (name, runner.proc.pid) in registered]


def _coordinator(store: StateStore) -> str | None:
    with store.transaction() as conn:
        running = [j for j in jobs.list_jobs(conn) if j.status == JobStatus.RUNNING and j.coordinator]
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
    if schedule.changes:  # movr.rides is added to movr_all in place, later
        _edit_feed(root, lambda tables: [t for t in tables if t != "movr.rides"])
        with_absolute_paths(root)
    homes = {name: node_copy(root, name) if schedule.changes else root for name in NAMES}
    project, _ = load_project(root)
    init_movr(project, rows=30, seed=schedule.seed)
    store = StateStore.of_project(project)
    rng = random.Random(schedule.seed)
    logs = {name: workdir / f"{name}.log" for name in NAMES}
    runners = {name: Runner(homes[name], logs[name], poll_interval=0.5, node_id=name) for name in NAMES}
    deploys: list[threading.Thread] = []
    returns: list[tuple[float, str]] = []  # (when, node): killed or drained nodes joining again
    workload = Workload(project, schedule.seconds, schedule.rate, schedule.seed)
    try:
        workload.start()
        began = time.monotonic()
        for fault in schedule.faults:
            while time.monotonic() - began < fault.at:
                _rejoin(homes, runners, logs, returns, time.monotonic() - began)
                time.sleep(0.1)
            if fault.action in CHANGES:
                deploys.append(_change(fault, root, homes, rng, outcome))
                continue
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
        for deploying in deploys:
            deploying.join()
        while returns:
            _rejoin(homes, runners, logs, returns, float("inf"))
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


def _rejoin(
    homes: dict[str, Path], runners: dict[str, Runner], logs, returns: list[tuple[float, str]], now: float
) -> None:
    """Start again, under their ids, the nodes whose time to join has come."""
    for entry in sorted(returns):
        when, name = entry
        if when <= now:
            returns.remove(entry)
            runners[name] = Runner(homes[name], logs[name], poll_interval=0.5, node_id=name)


def _edit_feed(root: Path, tables) -> bool:
    """movr_all's tables changed by `tables(list)` in the project at `root`; False when that changes nothing."""
    path = root / FEED_FILE
    doc = yaml.safe_load(path.read_text())
    feed = next(f for f in doc["feeds"] if f["name"] == "movr_all")
    now = tables(list(feed["tables"]))
    if now == feed["tables"]:
        return False
    feed["tables"] = now
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return True


def _change(fault: Fault, root: Path, homes: dict[str, Path], rng: random.Random, outcome) -> threading.Thread:
    """A change while the nodes follow, in a thread of its own: `table` adds movr.rides to movr_all (dropping
    movr.users once rides is in), the feed file reaching the nodes one by one `fault.hold` seconds apart at
    most; `new_job` cancels movr_all's job and continues it with `run --new-job --continue`."""
    order, gaps = rng.sample(NAMES, len(NAMES)), [rng.uniform(0, fault.hold) for _ in NAMES]

    def table() -> None:
        with _EDITING:
            changed = _edit_feed(
                root, lambda t: [*t, "movr.rides"] if "movr.rides" not in t else [x for x in t if x != "movr.users"]
            )
        for name, gap in zip(order, gaps):
            if changed:
                time.sleep(gap)
                deploy(root, homes[name], FEED_FILE)

    def new_job() -> None:
        with _EDITING:  # the new job made from the project as it stands, not as an edit leaves it halfway
            _new_job()

    def _new_job() -> None:
        cancel = subprocess.run(feedctl(root, "cancel", "movr_all"), capture_output=True, text=True)
        started = subprocess.run(
            feedctl(root, "run", "--new-job", "--continue", "-s", "movr_all"),
            capture_output=True,
            text=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
            timeout=600,
        )
        if cancel.returncode == 0 and started.returncode != 0 and "in its initial scan" in started.stdout:
            started = subprocess.run(
                feedctl(root, "run", "--new-job", "--rescan", "-s", "movr_all"),
                capture_output=True,
                text=True,
                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
                timeout=600,
            )
        if cancel.returncode != 0 or started.returncode != 0:
            outcome.problems.append(f"new_job: {(cancel.stdout + cancel.stderr + started.stdout)[-300:]}")

    thread = threading.Thread(target=table if fault.action == "table" else new_job, daemon=True)
    thread.start()
    return thread
