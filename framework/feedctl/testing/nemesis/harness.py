"""The nemesis's moving parts: a copy of the movr demo project tuned for many small batches and frequent
resolved timestamps, `feedctl run --follow` as a real process in its own process group (so a SIGKILL takes
Spark's JVM down with it), the movr workload in a thread, with sink faults the Kafka broker of one feed killed
and started again (`sink_faults`), and `verify` of every feed at the end."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from feedctl.state import jobs
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore
from feedctl.testing.nemesis import sink_faults
from feedctl.testing.nemesis.schedule import Round, Schedule
from feedctl.verify.checks import Report

PROJECT_FILES = ("project.yml", "feeds", "sinks", "macros")
LOCALITY = "region=us-east1"  # where the demo pins vehicles_in_use


def make_project(
    template: Path, root: Path, batch_rows: int = 10_000, file_size: str = "16MiB", uris: dict[str, str] | None = None
) -> Path:
    """The demo project under `root`, every feed with `updated`, resolved every second and small batches; the
    sinks named in `uris` moved to those URIs."""
    root.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        source = template / name
        if source.is_dir():
            shutil.copytree(source, root / name, dirs_exist_ok=True)
        else:
            shutil.copy(source, root / name)
    for path in (root / "feeds").glob("*.yml"):
        doc = yaml.safe_load(path.read_text())
        for feed in doc["feeds"]:
            feed.setdefault("options", {}).update(
                updated=True, resolved="1s", min_checkpoint_frequency="1s", batch_rows=batch_rows
            )
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    for path in (root / "sinks").glob("*.yml"):
        doc = yaml.safe_load(path.read_text())
        for sink in doc["sinks"]:
            if sink["name"] in (uris or {}):
                sink["uri"], sink["options"] = uris[sink["name"]], {}
            else:
                sink.setdefault("options", {})["file_size"] = file_size
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def with_absolute_paths(root: Path) -> None:
    """The project at `root` with its paths made absolute, as in its nodes' copies: one definition of each
    feed (its sink's URI among it) for the nodes and for commands run at `root`."""
    for relative in PROJECT_FILES:
        deploy(root, root, relative)


def node_copy(root: Path, name: str) -> Path:
    """A node's own copy of the project at `root`, as a host of its own holds one: its files are deployed to it
    one by one (`deploy`), while the tables, the state store and the sinks stay those of `root`."""
    copy = root / "copies" / name
    for relative in PROJECT_FILES:
        deploy(root, copy, relative)
    return copy


def deploy(root: Path, copy: Path, relative: str) -> None:
    """A file (or a folder's files) of the project at `root` written to a node's copy, paths made absolute."""
    source = root / relative
    if source.is_dir():
        for path in sorted(source.rglob("*")):
            if path.is_file():
                deploy(root, copy, str(path.relative_to(root)))
        return
    text = source.read_text()
    for relative_path in ("sqlite:///target/", "path: target/", "file://target/"):
        text = text.replace(relative_path, relative_path.replace("target/", f"{root}/target/"))
    target = copy / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def feedctl(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "feedctl.cli", "--project-dir", str(root), *args]


class Runner:
    """`feedctl run --follow` in a process group of its own; its output goes to `log`."""

    def __init__(
        self,
        root: Path,
        log: Path,
        kill_at: str | None = None,
        poll_interval: float = 0.2,
        node_id: str | None = None,
        locality: str = LOCALITY,
        feeds: tuple[str, ...] = (),
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        # a killed runner's log stays: unbuffered
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1", **(env or {})}
        self._log = open(log, "a")
        self.proc = subprocess.Popen(
            feedctl(
                root,
                "run",
                "--follow",
                "--poll-interval",
                str(poll_interval),
                "--locality",
                locality,
                *(("--node-id", node_id) if node_id else ()),
                *(a for f in feeds for a in ("--select", f)),
                *(("--testing-kill-at", kill_at) if kill_at else ()),
                *args,
            ),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the runner and everything it started."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._log.close()

    def pause(self) -> None:
        """SIGSTOP the runner and its JVM, as a long GC pause or a frozen VM would."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, as an operator stops it; SIGKILL if it does not stop in time."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        code = self.proc.poll()
        self.kill()  # the group: nothing it started outlives it
        return code if code is not None else -signal.SIGKILL


def catch_up(root: Path, log: Path) -> int:
    """One `feedctl run` in batch mode: every feed's job is brought up to date, then it exits."""
    with open(log, "a") as out:
        return subprocess.run(
            feedctl(root, "run", "--locality", LOCALITY),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
            timeout=900,
        ).returncode


class Workload(threading.Thread):
    """The movr workload for `seconds` at `rate` commits per second, stoppable."""

    def __init__(self, project, seconds: float, rate: float, seed: int):
        super().__init__(daemon=True)
        self.project, self.seconds, self.rate, self.seed = project, seconds, rate, seed
        self.stop = threading.Event()
        self.commits = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from feedctl.workload.movr import run_movr

        try:
            self.commits = run_movr(self.project, self.seconds, self.rate, self.seed, self.stop).commits
        except BaseException as exc:  # reported by the nemesis, never swallowed
            self.error = exc


@dataclass
class Outcome:
    seed: int
    schedule: Schedule
    kills: int = 0
    pauses: int = 0
    sink_outages: int = 0
    commits: int = 0
    reports: dict[str, Report] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what is wrong besides verify's findings
    seconds: float = 0.0

    @property
    def violations(self) -> int:
        return sum(f.count for r in self.reports.values() for f in r.findings.values()) + len(self.problems)


def control_job(project, ref: str, action: str) -> None:
    """pause | resume a job, as `feedctl pause|resume` does."""
    with StateStore.of_project(project).transaction() as conn:
        jobs.control(conn, jobs.find_job(conn, ref), action)


POINT_DEADLINE = 240.0  # how long a round waits for its runner to reach its fault point


def play_round(
    root: Path, project, r: Round, seed: int, log: Path, outcome: Outcome, broker: sink_faults.Broker | None = None
) -> None:
    from feedctl.state.jobs import JobError

    point = r.kill if r.kill and not r.kill.startswith("timer:") else None
    timer = float(r.kill.split(":")[1]) if r.kill and r.kill.startswith("timer:") else None
    # A round with a fault point lasts until the runner reaches it, the workload committing meanwhile (a point
    # is reached only while there are changes to emit): a slow start of Spark delays the kill, never skips it.
    seconds = max(r.seconds, POINT_DEADLINE) if point else r.seconds
    faults = {"args": sink_faults.RUNNER_ARGS, "env": sink_faults.RUNNER_ENV} if broker else {}
    runner = Runner(root, log, point, **faults)
    workload = Workload(project, seconds if point else r.burst, r.rate, seed)
    if r.burst or point:
        workload.start()
    started, paused, struck = time.monotonic(), False, False
    while time.monotonic() - started < seconds and runner.alive():
        elapsed = time.monotonic() - started
        if broker is not None:
            if r.sink_away and not struck and elapsed >= r.sink_away.at:
                broker.kill_for(r.sink_away.seconds)
                struck = True
            broker.tick()
        if timer is not None and elapsed >= timer:
            break
        if r.pause and not paused and elapsed >= r.pause_at:
            try:
                control_job(project, r.pause, "pause")
                paused = True
                outcome.pauses += 1
            except JobError:
                pass  # no job yet, or not running at this instant: verify will tell
        time.sleep(0.1)
    if timer is not None:
        runner.kill()
        outcome.kills += 1
    else:
        # Stopping cleanly; a runner with a fault point may still reach it while it finishes its batch.
        code = runner.stop()
        if point and code == -signal.SIGKILL:
            outcome.kills += 1
        elif code != 0:
            outcome.problems.append(f"a runner exited {code}" + (f" before reaching {point}" if point else ""))
    workload.stop.set()
    if r.burst or point:
        workload.join()
    outcome.commits += workload.commits
    if workload.error:
        outcome.problems.append(f"workload: {workload.error}")
    if paused:
        control_job(project, r.pause, "resume")


def play(template: Path, workdir: Path, schedule: Schedule) -> Outcome:
    """A whole run: the rounds (the first creates the jobs and their initial scans), a final catch-up, then
    `verify` of every feed."""
    from feedctl.project.loader import load_project
    from feedctl.workload.movr import init_movr

    started = time.monotonic()
    outcome = Outcome(schedule.seed, schedule)
    broker = sink_faults.Broker() if schedule.sink_faults else None
    try:
        uris = {sink_faults.SINK: broker.uri} if broker else None
        root = make_project(template, workdir / "project", schedule.batch_rows, schedule.file_size, uris)
        log = workdir / "runner.log"
        project, _ = load_project(root)
        init_movr(project, rows=30, seed=schedule.seed)
        for i, r in enumerate(schedule.rounds):
            play_round(root, project, r, schedule.seed * 1000 + i, log, outcome, broker)
        if broker is not None:
            broker.up()  # the catch-up and verify read a broker that is there
            outcome.sink_outages = broker.outages
        return judge(root, project, log, outcome, started)
    finally:
        if broker is not None:
            broker.close()


def judge(root: Path, project, log: Path, outcome: Outcome, started: float) -> Outcome:
    """The end of a run: a final catch-up, every job still running, and `verify` of every feed."""
    from feedctl.verify.across_jobs import verify_all_jobs
    from feedctl.verify.feed import verify_feed

    if catch_up(root, log) != 0:
        outcome.problems.append("the final catch-up run failed")
    with StateStore.of_project(project).reading() as conn:
        every = jobs.list_jobs(conn)  # oldest first
    newest = {j.feed: j for j in every}
    for job in newest.values():
        if job.status != JobStatus.RUNNING:
            outcome.problems.append(f"job {job.job_id} ({job.feed}) is {job.status}: {job.error}")
    for feed in project.feeds:
        if sum(j.feed == feed for j in every) > 1:  # a job canceled and continued: each job, the sink across them
            across = verify_all_jobs(root, feed)
            outcome.reports.update((f"{feed}#{r.job_id}", r) for r in across.reports)
            outcome.problems.extend(f"{feed}: {gap}" for gap in across.gaps)
            if across.below_resolved:
                outcome.problems.append(f"{feed}: {across.below_resolved} files below a resolved file")
            reports = across.reports
        else:
            reports = [verify_feed(root, feed)]
            outcome.reports[feed] = reports[0]
        for report in reports:  # a canceled job emitted past its last checkpoint: its successor emits it again
            if report.above_high_water and report.job_id == getattr(newest.get(feed), "job_id", None):
                outcome.problems.append(
                    f"{feed}: {report.above_high_water} changes above the final high-water mark of job {report.job_id}"
                )
    outcome.seconds = time.monotonic() - started
    return outcome
