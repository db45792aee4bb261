"""`feedctl nodes`: the runner processes sharing the state store, whether each is live, and what it runs."""

from __future__ import annotations

import time

from feedctl.commands.jobs import store_of
from feedctl.state import jobs, nodes, spans
from feedctl.state.jobs import JobStatus


def node_records(project_dir) -> list[dict]:
    """One record per registered node. A node killed without deregistering stays listed, not live, until
    its id runs again."""
    store = store_of(project_dir)
    now = time.time()
    with store.reading() as conn:
        members = nodes.list_nodes(conn)
        running = [j for j in jobs.list_jobs(conn) if j.status == JobStatus.RUNNING]
        held = spans.held_per_job(conn, [j.job_id for j in running])
    feed_of = {j.job_id: j.feed for j in running}
    records = []
    for n in members:
        mine = [j for j in running if j.coordinator == n.holder]
        per_job = held.get(n.node_id, {})
        records.append(
            {
                "node_id": n.node_id,
                "locality": n.locality,
                "host": n.host,
                "pid": n.pid,
                "live": n.live(now),
                "heartbeat_age_seconds": round(now - n.heartbeat_at, 1),
                "jobs_coordinated": len(mine),
                "spans_held": sum(per_job.values()),
                "spans_per_job": [
                    {"job_id": job_id, "feed": feed_of[job_id], "spans": count}
                    for job_id, count in sorted(per_job.items())
                ],
            }
        )
    return records


def spans_cell(record: dict) -> str:
    """`feed: spans` for each running job (one per feed) the node emits for: a column of `feedctl nodes`."""
    return ", ".join(f"{j['feed']}: {j['spans']}" for j in record["spans_per_job"]) or "-"
