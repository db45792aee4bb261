"""`feedctl status FEED`: one job, its coordinator and lease, and every span: the node emitting it, why
that node, how far it has emitted and how far behind it is."""

from __future__ import annotations

import time

from feedctl.commands.jobs import find_job, readable
from feedctl.job.headroom import Headrooms
from feedctl.project.loader import load_project
from feedctl.state import nodes, spans
from feedctl.state.jobs import ACTIVE, JobStatus, version_label
from feedctl.state.store import StateStore


def job_status(project_dir, ref: str) -> dict:
    project = load_project(project_dir)[0]
    store = StateStore.of_project(project)
    with store.reading() as conn:
        job = find_job(conn, project, ref)
        rows = spans.of_job(conn, job.job_id)
        holders = nodes.live_holders(conn)
        history = Headrooms(project.tables).of(conn, job) if job.status in ACTIVE else None
    now = time.time()
    live = {nodes.node_of(h) for h in holders}
    running = job.status == JobStatus.RUNNING
    records = []
    for s in rows:
        frontier = max(s.frontier, job.high_water)  # a time-only advance moves every span
        lag = spans.lag_seconds(s, job.high_water, now) if running else None
        lag = round(lag, 1) if lag is not None else None
        records.append(
            {
                "table": s.table,
                "span": s.span,
                "node": s.node,
                "home": s.home,
                "reason": s.reason or None,
                "note": s.note or None,
                "moving_to": s.moving_to,
                "batch": s.batch_seq,
                "frontier": str(frontier) if frontier.wall else None,
                "readable_frontier": readable(frontier) or None,
                "lag_seconds": lag,
                "node_live": s.node in live if s.node else False,
            }
        )
    lagging = spans.lagging(rows, job.high_water, live, now) if running else []
    return {
        "job_id": job.job_id,
        "feed": job.feed,
        "version": job.version,
        "status": job.status,
        "coordinator": nodes.node_of(job.coordinator),
        "coordinator_live": job.coordinator in holders if running else None,
        "lease_epoch": job.lease_epoch,
        "lease_expires_at": job.lease_expires_at,
        "high_water_timestamp": str(job.high_water) if job.high_water.wall else None,
        "readable_high_water_timestamptz": readable(job.high_water) or None,
        "lag_seconds": round(now - job.high_water.wall / 1e9, 1) if running and job.high_water.wall else None,
        "spans": records,
        "lagging_spans": len(lagging),
        "error": job.error,
        "history_headroom": history,
    }


def status_lines(record: dict) -> list[str]:
    """The job's lines above its spans' table, for people."""
    lease = f"lease epoch {record['lease_epoch']}"
    if record["lease_expires_at"]:
        lease += f", expires in {record['lease_expires_at'] - time.time():.1f} s"
    coordinator = record["coordinator"] or "none"
    if record["coordinator_live"] is False:
        coordinator += " (not live)"
    lag = f" (lag {record['lag_seconds']} s)" if record["lag_seconds"] is not None else ""
    lines = [
        f"job {record['job_id']} ({version_label(record['feed'], record['version'])}): {record['status']}; "
        f"coordinator {coordinator}, {lease}",
        f"high-water {record['high_water_timestamp'] or 'none yet'} "
        f"{record['readable_high_water_timestamptz'] or ''}{lag}".rstrip(),
    ]
    for h in record["history_headroom"] or []:
        if "error" in h:
            lines.append(f"history of {h['table']}: cannot be read now: {h['error']}")
        else:
            lines.append(
                f"history of {h['table']}: version {h['needed_version']} on kept for "
                f"{h['headroom_seconds'] / 3600:.1f} h more of its {h['retention_seconds'] / 3600:.0f} h retention"
                + (" (low: see feedctl retention)" if h["low"] else "")
            )
    return lines + ([f"error: {record['error']}"] if record["error"] else [])


def span_cell(span: dict, column: str) -> str:
    value = span[column]
    if column == "node":
        value = (value or "(unplaced)") + ("" if span["node_live"] or not value else " (not live)")
        if span["moving_to"]:
            value += f" → {span['moving_to']}"
    return "" if value is None else str(value)
