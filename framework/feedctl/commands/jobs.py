"""`feedctl jobs`: one record per job, as SHOW CHANGEFEED JOBS shows them."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from feedctl.diagnostics import UsageError, no_feed
from feedctl.job.definition import definition_of
from feedctl.job.headroom import Headrooms
from feedctl.project.loader import load_project
from feedctl.project.selectors import select_feeds
from feedctl.state import jobs, nodes
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore


def store_of(project_dir) -> StateStore:
    return StateStore.of_project(load_project(project_dir)[0])


def find_job(conn, project, ref: str) -> jobs.Job:
    """A job by id, a feed's newest job by name, or its version's (`orders@v1`); a name neither of the
    project's feeds nor of a job's is said with a did-you-mean."""
    try:
        return jobs.find_job(conn, ref)
    except jobs.JobError:
        if not ref.isdigit() and jobs.parse_label(ref)[0] not in project.feeds:
            raise jobs.JobError(no_feed(ref, project.feeds)) from None
        raise


def _selected(project, selectors: tuple[str, ...], rows: list[jobs.Job]) -> set[str]:
    """The feeds `selectors` select, as `-s` does for the project's feeds (a feed's tables, for `table:`, as its
    newest job reads them); a feed's name selects its jobs also once the feed is gone from the project."""
    gone = {j.feed for j in rows} - set(project.feeds)
    tables = {j.feed: definition_of(j).tables for j in rows}  # listed oldest first: the newest job's
    asked = [s for s in selectors if s not in gone]
    chosen, problems = select_feeds(project, asked, lambda feed: tables.get(feed.name, [])) if asked else ([], [])
    if problems:
        raise UsageError("; ".join(f"{p.message}{f' ({p.hint})' if p.hint else ''}" for p in problems))
    return set(chosen) | (set(selectors) & gone)


def readable(ts) -> str:
    if ts.wall == 0:
        return ""
    moment = datetime.fromtimestamp(ts.wall / 1e9, tz=timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


# Each field of a job's record (`feedctl jobs --json`, the docs page), as the manual's reference says it; a test
# holds the records to exactly these.
JOB_FIELDS = {
    "job_id": "The job's id, unique in the state store.",
    "feed": "The feed's name.",
    "version": "The version of the feed's output contract the job emits (`orders@v2` in the table).",
    "status": "`running`, `paused`, `failed`, `succeeded` or `canceled`.",
    "high_water_timestamp": "The high-water mark: every change at or below it is emitted; as an event timestamp "
    "of 33 digits (nanoseconds, a dot, a logical counter); null before the first checkpoint.",
    "readable_high_water_timestamptz": "The high-water mark as an RFC 3339 time, to the microsecond.",
    "resolved_timestamp": "The last resolved timestamp emitted to the sink, as an event timestamp; null for none.",
    "running_status": "What a running job is doing (`running: high-water=...`), or what it meets: an outage "
    "being retried, a node refusing it.",
    "note": "The error's first line, or what the job meets; empty mostly.",
    "coordinator": "The node coordinating the job (its `--node-id`).",
    "coordinator_live": "For a running job: whether that node is live (heartbeating); null otherwise.",
    "lag_seconds": "For a running job: now minus the high-water mark, in seconds; null otherwise.",
    "error": "Why the job failed or paused, whole; null for none.",
    "sink_uri": "The sink's URI, secrets shown as `****`.",
    "created": "When the job was created, as an RFC 3339 time.",
    "history_headroom": "For a running or paused job: per table, the oldest version it still needs and the time "
    "left under the table's retention (see History headroom); null for other jobs.",
}

JOB_COLUMNS = ["job_id", "feed", "status", "high_water", "lag", "node", "note"]


def job_cell(record: dict, column: str) -> str:
    """A record's column as the table shows it, compact: a running job no live node runs says so; the time
    to the second; the note is the error's first line, or what the job meets (`Job.note`)."""
    if column == "status" and record["coordinator_live"] is False:
        return "running (no live node)"
    if column == "high_water":
        return (record["readable_high_water_timestamptz"] or "")[:19].replace("T", " ")
    if column == "lag":
        return "" if record["lag_seconds"] is None else f"{record['lag_seconds']:g} s"
    if column == "node":
        return record["coordinator"] or ""
    if column == "feed":
        return jobs.version_label(record["feed"], record["version"])
    return str(record[column] if record[column] is not None else "")


def job_records(
    project_dir,
    every: bool = False,
    feeds: tuple[str, ...] = (),
    statuses: tuple[str, ...] = (),
    selectors: tuple[str, ...] = (),
    headroom: bool = False,
) -> list[dict]:
    """One record per job, as SHOW CHANGEFEED JOBS shows them: each feed's (and version's) newest job, or
    `every` job of the store's history; of `feeds`, of the feeds `selectors` select and in `statuses` only,
    when given. Sink URIs are stored redacted. A running job says whether a live node coordinates it
    (`coordinator_live`), and how far behind it is (`lag_seconds`: now - high-water mark); with `headroom`, a
    running or paused job's history headroom on each of its tables (`job/headroom.py`: it opens the tables)."""
    project = load_project(project_dir)[0]
    store = StateStore.of_project(project)
    with store.reading() as conn:
        rows = jobs.list_jobs(conn)
        live = nodes.live_holders(conn)
    if not every:  # each feed version's newest job: a feed's versions run side by side
        newest = {(j.feed, j.version): j for j in rows}  # listed oldest first
        rows = [j for j in rows if newest[(j.feed, j.version)] is j]
    chosen = _selected(project, selectors, rows) if selectors else None
    rows = [
        j
        for j in rows
        if (not feeds or j.feed in feeds)
        and (chosen is None or j.feed in chosen)
        and (not statuses or j.status in statuses)
    ]
    now = time.time()
    history = {}
    if headroom:
        headrooms = Headrooms(project.tables)
        with store.reading() as conn:
            history = {j.job_id: headrooms.of(conn, j) for j in rows if j.status in jobs.ACTIVE}
    return [
        {
            "job_id": j.job_id,
            "feed": j.feed,
            "version": j.version,
            "status": j.status,
            "high_water_timestamp": str(j.high_water) if j.high_water.wall else None,
            "readable_high_water_timestamptz": readable(j.high_water) or None,
            "resolved_timestamp": str(j.resolved) if j.resolved.wall else None,
            "running_status": j.running_status,
            "note": (j.error or j.note).split("\n")[0],
            "coordinator": nodes.node_of(j.coordinator),
            "coordinator_live": j.coordinator in live if j.status == JobStatus.RUNNING else None,
            "lag_seconds": round(now - j.high_water.wall / 1e9, 1)
            if j.status == JobStatus.RUNNING and j.high_water.wall
            else None,
            "error": j.error,
            "sink_uri": j.sink_uri,
            "created": datetime.fromtimestamp(j.created_at, tz=timezone.utc)
            .isoformat(timespec="seconds")
            .replace("+00:00", "Z"),
            "history_headroom": history.get(j.job_id),
        }
        for j in rows
    ]
