"""`make run`: the movr demo end to end, in the project at the current directory.

Create the demo tables if missing, run every feed (catch up and stop; the first time, this creates the jobs
and emits the initial scans), commit five seconds of workload, run the feeds again, then say where the files
are, how many messages they hold, the latest resolved timestamp, and what `feedctl verify` finds.
"""

from __future__ import annotations

import os
import sys

from feedctl.compiler.compile import compile_project
from feedctl.commands.run import run_feeds
from feedctl.coordinator.runner import RunSettings
from feedctl.project.loader import load_project
from feedctl.sinks.cloudstorage import SinkFolder, local_path
from feedctl.verify.feed import verify_feed
from feedctl.workload.movr import init_movr, run_movr


def _say(message: str, **fields) -> None:
    if fields.get("event") != "progress":  # a bar's steps: `feedctl run` draws them on a terminal
        print(message, flush=True)


def main(project_dir: str = ".") -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    project, _ = load_project(project_dir)
    created = init_movr(project)
    for table in created.created:
        _say(f"created {table} ({created.rows[table]} rows)")
    result = compile_project(project_dir)
    _say(f"compiled {len(result.feeds)} feeds; catching up")
    # The demo's runner lives in us-east1, where vehicles_in_use's execution_locality pins that feed.
    settings = RunSettings(locality="region=us-east1")
    first = {r.feed: r for r in run_feeds(project_dir, settings=settings, log=_say)}
    stats = run_movr(project, duration=5, rate=5)
    _say(f"workload: {stats.commits} commits in {stats.seconds:.0f}s; running the feeds again")
    reports = run_feeds(project_dir, settings=settings, log=_say)
    failed = False
    for report in reports:
        sink = project.sinks[result.feeds[report.feed].feed.sink]
        files = SinkFolder(sink.uri, str(project.root)).list()
        data = [f for f in files if not f.endswith(".RESOLVED")]
        resolved = [f for f in files if f.endswith(".RESOLVED")]
        where = local_path(sink.uri, project.root)
        before = first.get(report.feed)
        _say(f"\n{report.feed}: job {report.job_id} {report.status}, "
             f"{(before.messages if before else 0) + report.messages} messages emitted by this demo")
        _say(f"  sink: {where} ({len(data)} data files, {len(resolved)} resolved files)")
        _say(f"  latest resolved: {resolved[-1] if resolved else 'none yet'}")
        if report.job_id is not None:
            check = verify_feed(project_dir, report.feed)
            violations = sum(f.count for f in check.findings.values())
            _say(f"  feedctl verify {report.feed}: {'OK' if check.ok else 'FAILED'} ({check.messages} messages "
                 f"against {check.expected} changes in the tables' history, {violations} violations)")
            failed |= not check.ok
        failed |= report.status in ("failed", "error")
        if report.note:
            _say(f"  note: {report.note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
