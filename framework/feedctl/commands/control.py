"""`feedctl pause|resume|cancel JOB|FEED`."""

from __future__ import annotations

from feedctl.project.loader import load_project
from feedctl.state import jobs
from feedctl.state.store import StateStore


def control_job(project_dir, ref: str, action: str) -> jobs.Job:
    """pause | resume | cancel the job named by id or by feed (its newest job)."""
    store = StateStore.of_project(load_project(project_dir)[0])
    with store.transaction() as conn:
        return jobs.control(conn, jobs.find_job(conn, ref), action)
