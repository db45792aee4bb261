"""`feedctl verify FEED --all-jobs`: every job of the feed judged as `verify --job` judges it, then what a
consumer of the feed's sink sees across the jobs, which no job alone shows:

- gap: a job that started after the high-water mark of the job before it in the same sink, without scanning
  its tables: the changes in between were emitted by neither;
- below resolved: a data file of a job that sorts at or below a RESOLVED file an earlier job had written in
  the same folder. A consumer that read up to that RESOLVED file never lists below it again, so it never
  reads the file (a listing in name order cannot show this: the file came after the RESOLVED file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from feedctl.diagnostics import UsageError, no_feed
from feedctl.job.definition import definition_of
from feedctl.project.loader import load_project
from feedctl.sinks import naming
from feedctl.sinks.messages import NAME
from feedctl.sinks.registry import open_sink
from feedctl.sinks.versioned import at_version
from feedctl.state import jobs
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from feedctl.verify.checks import EXAMPLES, Report, finding_lines
from feedctl.verify.feed import verify_feed


@dataclass
class AcrossJobs:
    feed: str
    reports: list[Report]
    gaps: list[str] = field(default_factory=list)
    below_resolved: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports) and not self.gaps and not self.below_resolved

    def lines(self) -> list[str]:
        out = []
        for report in self.reports:
            out += report.lines()
        out.append(f"verify {self.feed} across its {len(self.reports)} jobs")
        out += finding_lines("gaps between jobs", len(self.gaps), self.gaps)
        out += finding_lines("files below a resolved file", self.below_resolved, self.examples)
        out.append("OK" if self.ok else "FAILED")
        return out

    def to_json(self) -> dict:
        return {
            "feed": self.feed,
            "ok": self.ok,
            "jobs": [r.to_json() for r in self.reports],
            "gaps": self.gaps,
            "below_resolved": self.below_resolved,
            "examples": self.examples,
        }


def verify_all_jobs(project_dir, feed: str, capture: str | None = None, progress=lambda text: None) -> AcrossJobs:
    project, _ = load_project(project_dir)
    if feed not in project.feeds:
        raise UsageError(no_feed(feed, project.feeds))
    store = StateStore.of_project(project)
    try:
        with store.reading() as conn:
            every = [j for j in jobs.list_jobs(conn) if j.feed == feed]  # in creation order
    finally:
        store.close()
    if not every:
        raise UsageError(f'feed "{feed}" has no job to verify (feedctl run creates it)')
    out = AcrossJobs(feed, [verify_feed(project_dir, feed, j.job_id, capture, progress) for j in every])
    out.gaps = gaps(every)
    sink = project.sinks.get(definition_of(every[-1]).sink)
    if sink is not None and sink.kind == "cloudstorage":
        sink = at_version(sink, every[-1].version)
        folder = open_sink(sink.uri, sink.options, str(project.root)).folder()
        found = below_resolved([j for j in every if _same_place(j, every[-1])], folder.list())
        out.below_resolved, out.examples = len(found), found[:EXAMPLES]
    return out


def _same_place(one: jobs.Job, other: jobs.Job) -> bool:
    """Whether two jobs emitted into the same place: one sink, at one contract version."""
    return one.sink_uri == other.sink_uri and one.version == other.version


def _reach(job: jobs.Job) -> Hlc:
    """Up to where a job emitted every change: its high-water mark, or its start before that moved."""
    return job.high_water if job.high_water.wall else job.start


def _scanned(job: jobs.Job) -> bool:
    return definition_of(job).options.scans and bool(job.initial_scan_done)


def gaps(every: list[jobs.Job]) -> list[str]:
    """Consecutive jobs into one sink between which changes were emitted by neither."""
    out = []
    for before, after in zip(every, every[1:]):
        if _same_place(before, after) and after.start > _reach(before) and not _scanned(after):
            out.append(
                f"job {after.job_id} started at {after.start}, after job {before.job_id}'s high-water mark "
                f"{_reach(before)}, without a scan: changes between them are in neither job's files"
            )
    return out


def below_resolved(every: list[jobs.Job], names: list[str]) -> list[str]:
    """Data files of a job at or below a RESOLVED file of the folder that jobs before it could have written
    (at or below their high-water marks)."""
    resolved = sorted((naming.parse_ts33(m["ts"]), name) for name in names if (m := NAME.match(name)) and m["resolved"])
    out, reach = [], None
    for job in every:
        floor = max(((ts, name) for ts, name in resolved if reach is not None and ts <= reach), default=None)
        if floor is not None:
            mine = f"{job.job_id:016x}"
            for name in names:
                m = NAME.match(name)
                if m and m["job"] == mine and naming.parse_ts33(m["ts"]) <= floor[0]:
                    out.append(
                        f"{name}: job {job.job_id} wrote it at or below {floor[1]}, written before it by an "
                        "earlier job: a consumer that read up to that file never reads this one"
                    )
        reach = max(reach, _reach(job)) if reach is not None else _reach(job)
    return out
