"""`feedctl jobs`: one record per job, as SHOW CHANGEFEED JOBS shows them."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from feedctl.project.loader import load_project
from feedctl.state import jobs, nodes
from feedctl.state.store import StateStore


def store_of(project_dir) -> StateStore:
    return StateStore.of_project(load_project(project_dir)[0])


def readable(ts) -> str:
    if ts.wall == 0:
        return ""
    moment = datetime.fromtimestamp(ts.wall / 1e9, tz=timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


JOB_COLUMNS = ["job_id", "feed", "status", "high_water_timestamp", "readable_high_water_timestamptz", "lag_seconds",
               "running_status", "coordinator", "error"]


def job_cell(record: dict, column: str) -> str:
    """A record's column as the table shows it: a running job no live node runs says so."""
    if column == "status" and record["coordinator_live"] is False:
        return "running (no live node)"
    return str(record[column] if record[column] is not None else "")


def job_records(project_dir) -> list[dict]:
    """One record per job, as SHOW CHANGEFEED JOBS shows them; sink URIs are stored redacted. A running
    job says whether a live node coordinates it (`coordinator_live`), and how far behind it is (`lag_seconds`:
    now - high-water mark)."""
    store = store_of(project_dir)
    with store.reading() as conn:
        rows = jobs.list_jobs(conn)
        live = nodes.live_holders(conn)
    now = time.time()
    return [{
        "job_id": j.job_id, "feed": j.feed, "status": j.status,
        "high_water_timestamp": str(j.high_water) if j.high_water.wall else None,
        "readable_high_water_timestamptz": readable(j.high_water) or None,
        "resolved_timestamp": str(j.resolved) if j.resolved.wall else None,
        "running_status": j.running_status, "coordinator": nodes.node_of(j.coordinator),
        "coordinator_live": j.coordinator in live if j.status == "running" else None,
        "lag_seconds": round(now - j.high_water.wall / 1e9, 1) if j.status == "running" and j.high_water.wall
        else None, "error": j.error,
        "sink_uri": j.sink_uri, "created": datetime.fromtimestamp(j.created_at, tz=timezone.utc).isoformat(
            timespec="seconds").replace("+00:00", "Z"),
    } for j in rows]
