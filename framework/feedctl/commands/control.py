"""`feedctl pause|resume|cancel JOB|FEED`."""

from __future__ import annotations

from feedctl.commands.jobs import store_of
from feedctl.state import jobs


def control_job(project_dir, ref: str, action: str) -> jobs.Job:
    """pause | resume | cancel the job named by id or by feed (its newest job)."""
    store = store_of(project_dir)
    with store.transaction() as conn:
        return jobs.control(conn, jobs.find_job(conn, ref), action)
