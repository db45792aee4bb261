"""A feed's job: created where the feed says to start (now, or after its cursor), found again by later runs,
and refused when the feed's definition changed under it."""

from __future__ import annotations

import time

from sqlalchemy.exc import IntegrityError

from feedctl.compiler.compile import CompiledFeed
from feedctl.coordinator.placement import default_spans
from feedctl.project.model import Project
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.state import jobs, progress
from feedctl.state.store import StateStore
from feedctl.units import Hlc, parse_timestamp


class RunError(Exception):
    """A feed cannot run as asked; the message says why and what to do."""


def start_point(feed: str, options: dict, sources: dict[str, DeltaSource], store: StateStore
                ) -> tuple[Hlc, dict[str, int]]:
    """Where a new job starts: each table's latest version and the time after reading them (a commit
    landing meanwhile gets a later event timestamp, so it is emitted), or after the cursor."""
    cursor = options.get("cursor")
    point = parse_timestamp(cursor) if cursor else None
    if point is not None and point.version is not None and len(sources) > 1:
        raise RunError(f"feed {feed}: cursor version:{point.version} names a version of one "
                       "table; with several tables use a timestamp cursor")
    positions = {}
    for table, source in sources.items():
        latest = source.latest_version()
        if point is None:
            positions[table] = latest
        elif point.version is not None:
            if point.version > latest:
                raise RunError(f"cursor version:{point.version} is after the latest version {latest} of {table}")
            positions[table] = point.version
        else:
            commits = source.commits(-1, latest)
            positions[table] = max([c.version for c in commits if c.commit_ns <= point.hlc.wall], default=-1)
            with store.transaction() as conn:
                stamped_after = progress.first_recorded_above(conn, feed, table, point.hlc)
            if stamped_after is not None:  # an earlier job gave it an event timestamp after the cursor
                positions[table] = min(positions[table], stamped_after - 1)
    if point is None:
        return Hlc(time.time_ns()), positions
    if point.hlc is not None:
        return point.hlc, positions
    [(table, version)] = positions.items()
    commit = sources[table].commits(version - 1, version)[0] if version >= 0 else None
    return Hlc(commit.commit_ns if commit else 0), positions


def create_job(project: Project, compiled: CompiledFeed, sources: dict[str, DeltaSource], store: StateStore,
               log) -> jobs.Job:
    feed = compiled.feed
    try:
        start, positions = start_point(feed.name, compiled.options, sources, store)
        for table, source in sources.items():
            source.check_readable(max(positions[table], 0))
    except SourceError as exc:
        raise RunError(f"feed {feed.name}: {exc}") from None
    spans = {t: project.tables[t].spans or default_spans(project) for t in sources}
    sink = project.sinks[feed.sink]
    definition = {"tables": compiled.tables, "sql": compiled.sql, "options": compiled.options, "sink": sink.name,
                  "columns": compiled.columns, "keys": _keys(project, compiled.tables)}
    try:
        with store.transaction() as conn:
            job = jobs.create_job(conn, feed.name, compiled.definition_hash, definition, sink.uri_display, start,
                                  {t: (positions[t], spans[t]) for t in sources})
    except (jobs.JobExists, IntegrityError):  # another node created the feed's job first: run that one
        with store.transaction() as conn:
            return jobs.newest_job(conn, feed.name)
    log(f"created job {job.job_id} for feed {feed.name} at {start}", event="job_created", job_id=job.job_id,
        feed=feed.name)
    return job


def stopped(job: jobs.Job) -> tuple[str, str]:
    """Why a job that is not running does not run: (note, error); the error stands while the job is paused
    or failed, so that the run exits 1."""
    again = f"`feedctl run --new-job -s {job.feed}` starts a new job"
    note = {"paused": f"paused; `feedctl resume {job.feed}` to continue",
            "failed": f"failed: {job.error}; {again}", "canceled": f"canceled; {again}",
            "succeeded": "finished"}.get(job.status, job.status)
    return note, job.error if job.status in ("paused", "failed") else ""


def _keys(project: Project, tables: list[str]) -> dict[str, dict]:
    """What places a table's rows in spans: its primary key and region column."""
    return {t: {"primary_key": project.tables[t].primary_key, "region_column": project.tables[t].region_column}
            for t in tables}


def check_definition(job: jobs.Job, compiled: CompiledFeed, project: Project) -> None:
    """A job runs the definition it was created with, or nothing."""
    name = compiled.feed.name
    recorded = job.definition.get("keys") or {}  # jobs created before keys were recorded: not compared
    for table, now in _keys(project, [t for t in compiled.tables if t in recorded]).items():
        if now != recorded[table]:
            was = recorded[table]
            raise RunError(
                f"the primary key or region column of {table} changed in project.yml since job {job.job_id} of "
                f"feed {name} was created ({was['primary_key']}, region column {was['region_column']} → "
                f"{now['primary_key']}, region column {now['region_column']}): a key change is not yet taken "
                f"as a schema change. Cancel the job (`feedctl cancel {name}`), then `feedctl run --new-job -s "
                f"{name}` with cursor: '{job.high_water}' to continue where it stopped; or restore the key.")
    if job.definition_hash == compiled.definition_hash:
        return
    raise RunError(
        f"feed {name} changed since its job {job.job_id} was created (definition "
        f"{job.definition_hash[:19]} → {compiled.definition_hash[:19]}). To run the new definition, "
        f"cancel the job (`feedctl cancel {name}`), then `feedctl run --new-job -s "
        f"{name}`: a new job starts, with an initial scan unless the feed sets cursor "
        f"(cursor: '{job.high_water}' continues where it stopped). Or restore the previous definition.")
