"""`feedctl retention TABLE`: the oldest version of a table any running or paused job of the project still
needs, and the `VACUUM` that keeps it, for the table's maintenance jobs."""

from __future__ import annotations

import time
from dataclasses import dataclass

from feedctl.diagnostics import UsageError, did_you_mean, first_line
from feedctl.job.definition import definition_of
from feedctl.job.headroom import Headroom, headroom, needed_versions
from feedctl.project.loader import load_project
from feedctl.source.delta import SourceError, of_table
from feedctl.source.retention import RetentionError
from feedctl.state import jobs
from feedctl.state.store import StateStore


@dataclass(frozen=True)
class Needed:
    table: str
    location: str  # redacted
    job_id: int | None  # the job needing the oldest version (None: no job reads the table)
    feed: str | None
    headroom: Headroom | None

    def lines(self) -> list[str]:
        if self.headroom is None:
            return [f"{self.table}: no running or paused job reads it"]
        h, now = self.headroom, time.time_ns()
        out = [
            f"{self.table}: version {h.needed_version} is the oldest a job still needs "
            f"(job {self.job_id}, feed {self.feed})"
        ]
        if h.needed_commit_ns is None:
            out.append("  it is not committed yet: any VACUUM within the table's retention keeps it")
            return out
        out.append(f"  headroom: {h.seconds / 3600:.1f} hours of the table's {h.retention.shortest / 3600:.0f}")
        keeping = h.retention.keeping(h.needed_commit_ns, now)
        out.append(f"  kept by: VACUUM delta.`{self.location}` {keeping} (or longer)")
        return out

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "job_id": self.job_id,
            "feed": self.feed,
            **(self.headroom.to_json() if self.headroom else {"needed_version": None}),
            "vacuum_retain": self.headroom.retention.keeping(self.headroom.needed_commit_ns, time.time_ns())
            if self.headroom and self.headroom.needed_commit_ns is not None
            else None,
        }


def oldest_needed(project_dir, table: str) -> Needed:
    project = load_project(project_dir)[0]
    declared = project.tables.get(table)
    if declared is None:
        hint = did_you_mean(table, list(project.tables))
        raise UsageError(f'no table "{table}" in project.yml' + (f"; {hint}" if hint else ""))
    with StateStore.of_project(project).reading() as conn:
        candidates = []
        for job in jobs.list_jobs(conn):
            if job.status in jobs.ACTIVE and table in definition_of(job).tables:
                needed = needed_versions(conn, job).get(table)
                if needed is not None:
                    candidates.append((needed, job))
    if not candidates:
        return Needed(table, declared.location_display, None, None, None)
    (version, commit_ns), job = min(candidates, key=lambda c: c[0][0])
    try:
        found = headroom(of_table(table, declared), version, commit_ns)
    except (SourceError, RetentionError) as exc:  # the table, or its retention, cannot be read
        raise UsageError(f"{table}: {first_line(exc)}") from None
    return Needed(table, declared.location_display, job.job_id, job.feed, found)
