"""`feedctl pause|resume|cancel JOB|FEED`."""

from __future__ import annotations

from feedctl.commands.jobs import find_job
from feedctl.project.loader import load_project
from feedctl.state import jobs
from feedctl.state.store import StateStore


def control_job(project_dir, ref: str, action: str) -> jobs.Job:
    """pause | resume | cancel the job named by id or by feed (its newest job)."""
    project = load_project(project_dir)[0]
    store = StateStore.of_project(project)
    with store.transaction() as conn:
        return jobs.control(conn, find_job(conn, project, ref), action)
