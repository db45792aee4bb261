"""`make run`: the movr demo end to end, in the project at the current directory.

Create the demo tables if missing, run every feed (catch up and stop; the first time, this creates the jobs
and emits the initial scans), commit five seconds of workload, run the feeds again, then say where the files
are, how many messages they hold, the latest resolved timestamp, and what `feedctl verify` finds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from feedctl.commands.run import run_feeds
from feedctl.compiler.compile import compile_project
from feedctl.node.settings import RunSettings
from feedctl.project.loader import load_project
from feedctl.reporting import Reporter
from feedctl.sinks.cloudstorage import SinkFolder, local_path
from feedctl.units import plural
from feedctl.verify.feed import verify_feed
from feedctl.workload.movr import init_movr, run_movr


def _say(message: str) -> None:
    print(message, flush=True)


def main(project_dir: str = ".") -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    project, _ = load_project(project_dir)
    created = init_movr(project)
    for table in created.created:
        _say(f"created {table} ({plural(created.rows[table], 'row')})")
    result = compile_project(project_dir)
    _say(f"compiled {plural(len(result.feeds), 'feed')}; catching up")
    # The demo's runner lives in us-east1, where vehicles_in_use's execution_locality pins that feed.
    settings = RunSettings(locality="region=us-east1")
    log = Reporter().log  # the runs' events as `feedctl run` prints them
    first = {r.feed: r for r in run_feeds(project_dir, settings=settings, log=log)}
    stats = run_movr(project, duration=5, rate=5)
    _say(f"workload: {plural(stats.commits, 'commit')} in {stats.seconds:.0f}s; running the feeds again")
    reports = run_feeds(project_dir, settings=settings, log=log)
    failed = False
    for report in reports:
        sink = project.sinks[result.feeds[report.feed].feed.sink]
        files = SinkFolder(sink.uri, str(project.root)).list()
        data = [f for f in files if not f.endswith(".RESOLVED")]
        resolved = [f for f in files if f.endswith(".RESOLVED")]
        where = local_path(sink.uri, project.root) or sink.uri
        where = (
            where.relative_to(project.root) if isinstance(where, Path) and where.is_relative_to(project.root) else where
        )
        before = first.get(report.feed)
        _say(
            f"\n{report.feed}: job {report.job_id} {report.status}, "
            f"{plural((before.messages if before else 0) + report.messages, 'message')} emitted by this demo"
        )
        _say(f"  sink: {where} ({plural(len(data), 'data file')}, {plural(len(resolved), 'resolved file')})")
        _say(f"  latest resolved: {resolved[-1] if resolved else 'none yet'}")
        if report.job_id is not None:
            check = verify_feed(project_dir, report.feed)
            violations = sum(f.count for f in check.findings.values())
            _say(
                f"  feedctl verify {report.feed}: {'OK' if check.ok else 'FAILED'} "
                f"({plural(check.messages, 'message')} against {plural(check.expected, 'change')} in the tables' "
                f"history, {plural(violations, 'violation')})"
            )
            failed |= not check.ok
        failed |= report.status in ("failed", "error")
        if report.note:
            _say(f"  note: {report.note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
