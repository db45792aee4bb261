"""Crash tests: real `feedctl run --follow` processes while the movr workload commits, SIGKILLed (with
Spark's JVM) at each fault point and at a random instant, paused and resumed, restarted; then a catch-up
and `feedctl verify` of every feed: nothing missing, no order or resolved violation, no duplicate file.
A canceled feed continued by a new job from its high-water mark with `cursor` loses nothing either.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from feedctl.commands.control import control_job
from feedctl.commands.jobs import job_records
from feedctl.project.loader import load_project
from feedctl.testing.nemesis.harness import Runner, Workload, catch_up, make_project, play
from feedctl.testing.nemesis.schedule import Round, Schedule
from feedctl.verify.feed import verify_feed
from feedctl.workload.movr import init_movr
from support import REPO
from support.nodes import wait_for


def assert_clean(outcome) -> None:
    report = "\n".join(line for r in outcome.reports.values() for line in r.lines())
    assert not outcome.problems and outcome.violations == 0, "\n".join(outcome.problems) + "\n" + report
    assert all(r.messages > 0 and r.above_high_water == 0 for r in outcome.reports.values()), report


@pytest.mark.timeout(1800)
def test_runs_killed_at_every_fault_point_and_paused_during_a_workload_lose_nothing(tmp_path):
    # Each round with a fault point lasts until the runner reaches it (the workload committing meanwhile).
    rounds = (
        Round("after-emit:2", seconds=40, burst=30, rate=5, pause=None),
        Round("timer:12", seconds=40, burst=30, rate=5, pause="ride_ends", pause_at=5),
        Round("after-checkpoint:2", seconds=40, burst=30, rate=5, pause=None),
        Round(None, seconds=30, burst=25, rate=5, pause="movr_all", pause_at=15),
        Round("after-resolved-file:1", seconds=40, burst=30, rate=5, pause=None),
        Round("after-intent:2", seconds=40, burst=30, rate=5, pause=None),
    )
    outcome = play(REPO, tmp_path, Schedule(seed=11, batch_rows=20, file_size="2KiB", rounds=rounds))
    assert_clean(outcome)
    assert outcome.kills == 5, "the runner died at every fault point, and at the timer"
    assert outcome.pauses == 2 and outcome.commits > 100


def test_a_canceled_feed_continued_from_its_high_water_mark_with_cursor_loses_nothing(tmp_path):
    root = make_project(REPO, tmp_path / "project", batch_rows=5)
    log = tmp_path / "runner.log"
    project, _ = load_project(root)
    init_movr(project, rows=30, seed=5)
    assert catch_up(root, log) == 0
    workload = Workload(project, seconds=40, rate=5, seed=5)
    started = time.time_ns()
    workload.start()
    runner = Runner(root, log)
    try:
        wait_for(lambda: _high_water(root) > started + 3e9, "movr_all emits the workload's first seconds")
        control_job(root, "movr_all", "cancel")
        [old] = [j for j in job_records(root) if j["feed"] == "movr_all"]
        assert old["status"] == "canceled" and old["high_water_timestamp"]

        feeds_file = root / "feeds" / "movr.yml"
        doc = yaml.safe_load(feeds_file.read_text())
        [feed] = [f for f in doc["feeds"] if f["name"] == "movr_all"]
        feed["options"]["cursor"] = old["high_water_timestamp"]
        feeds_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        new_job = subprocess.run(
            [sys.executable, "-m", "feedctl.cli", "--project-dir", str(root), "run", "--new-job", "-s", "movr_all"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert new_job.returncode == 0, new_job.stderr
    finally:  # nothing the test started outlives it, whatever failed
        workload.stop.set()  # the new job runs: the workload has committed across both jobs
        workload.join()
        code = runner.stop()
    assert code == 0
    # `commits` is counted once the workload ends: it ran across both jobs, whose messages verify judges below
    assert workload.error is None and workload.commits > 0
    assert catch_up(root, log) == 0

    before = verify_feed(root, "movr_all", int(old["job_id"]))
    after = verify_feed(root, "movr_all")
    for report in (before, after):
        assert report.ok and report.messages > 0, "\n".join(report.lines())
    assert after.job_id != before.job_id and after.above_high_water == 0
    new = [j for j in job_records(root) if j["job_id"] == after.job_id][0]
    assert new["status"] == "running"
    # the two jobs meet: the new one started where the old one's high-water mark stood
    assert after.start == before.high_water


def _high_water(root) -> int:
    """movr_all's high-water mark, in nanoseconds (0 before it moved)."""
    [job] = [j for j in job_records(root) if j["feed"] == "movr_all" and j["status"] == "running"] or [{}]
    return int((job.get("high_water_timestamp") or "0").split(".")[0])
