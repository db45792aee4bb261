"""`feedctl pause|resume|cancel JOB|FEED`."""

from __future__ import annotations

from feedctl.diagnostics import did_you_mean
from feedctl.project.loader import load_project
from feedctl.state import jobs
from feedctl.state.store import StateStore


def control_job(project_dir, ref: str, action: str) -> jobs.Job:
    """pause | resume | cancel the job named by id or by feed (its newest job)."""
    project = load_project(project_dir)[0]
    store = StateStore.of_project(project)
    with store.transaction() as conn:
        if not ref.isdigit() and ref not in project.feeds and jobs.newest_job(conn, ref) is None:
            hint = did_you_mean(ref, project.feeds)
            raise jobs.JobError(f'no feed named "{ref}"' + (f"; {hint}" if hint else ""))
        return jobs.control(conn, jobs.find_job(conn, ref), action)
