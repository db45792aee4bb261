"""Runners of earlier versions could create two jobs of one feed: all but the newest running or paused one
are failed, saying why, before the index that forbids it is built."""

from __future__ import annotations

from sqlalchemy import func, select, text, update
from sqlalchemy.engine import Connection

from feedctl.state.jobs import JobStatus
from feedctl.state.schema import ACTIVE_WHERE, jobs

ACTIVE = (JobStatus.RUNNING, JobStatus.PAUSED)


def upgrade(conn: Connection) -> None:
    feeds = (
        conn.execute(
            select(jobs.c.feed).where(jobs.c.status.in_(ACTIVE)).group_by(jobs.c.feed).having(func.count() > 1)
        )
        .scalars()
        .all()
    )
    for feed in feeds:
        ids = (
            conn.execute(
                select(jobs.c.job_id)
                .where(jobs.c.feed == feed, jobs.c.status.in_(ACTIVE))
                .order_by(jobs.c.created_at.desc(), jobs.c.job_id.desc())
            )
            .scalars()
            .all()
        )
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id.in_(ids[1:]))
            .values(
                status=JobStatus.FAILED,
                error=f"a second active job of feed {feed} (job {ids[0]} is kept); failed when the "
                "state store was upgraded to one active job per feed",
            )
        )
    # as version 2 built it (version 9 keys it by the feed's contract version too)
    conn.execute(text(f"CREATE UNIQUE INDEX IF NOT EXISTS one_active_job_per_feed ON jobs (feed) WHERE {ACTIVE_WHERE}"))
