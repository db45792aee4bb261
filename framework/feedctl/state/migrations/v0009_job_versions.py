"""A job's contract version (a feed's `version:`): the jobs there emit version 1, and the index that allowed one
running or paused job per feed allows one per feed and version, so that a feed's new version runs beside the
old one until that is canceled."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from feedctl.state.migrations import add_column
from feedctl.state.schema import one_active_job_per_version


def upgrade(conn: Connection) -> None:
    add_column(conn, "jobs", "version", "INTEGER NOT NULL DEFAULT 1")
    conn.execute(text("DROP INDEX IF EXISTS one_active_job_per_feed"))
    one_active_job_per_version.create(conn, checkfirst=True)
