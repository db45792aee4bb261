"""A feed's job: created where the feed says to start (now, or after its cursor), found again by later runs,
and why it stopped, when it does not run."""

from __future__ import annotations

import time
from dataclasses import replace

from sqlalchemy.exc import IntegrityError

from feedctl.compiler.compile import CompiledFeed
from feedctl.errors import RunError
from feedctl.job.definition import JobDefinition, definition_of
from feedctl.job.placement import default_spans
from feedctl.job.revision import declared_keys, metadata, view
from feedctl.job.table_change import TableChange, TableOp
from feedctl.options import InitialScan, Options
from feedctl.project.model import Project
from feedctl.sinks.sink import Sink
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.state import event_times, jobs, sequence
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore
from feedctl.units import Hlc, parse_timestamp


def start_point(
    feed: str, options: Options, sources: dict[str, DeltaSource], store: StateStore
) -> tuple[Hlc, dict[str, int]]:
    """Where a new job starts: each table's latest version and the time after reading them (a commit
    landing meanwhile gets a later event timestamp, so it is emitted), or after the cursor."""
    cursor = options.cursor
    point = parse_timestamp(cursor) if cursor else None
    if point is not None and point.version is not None and len(sources) > 1:
        raise RunError(
            f"feed {feed}: cursor version:{point.version} names a version of one "
            "table; with several tables use a timestamp cursor"
        )
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
            positions[table] = version_at(source, point.hlc, latest)
            with store.transaction() as conn:
                stamped_after = event_times.first_recorded_above(conn, feed, table, point.hlc)
            if stamped_after is not None:  # an earlier job gave it an event timestamp after the cursor
                positions[table] = min(positions[table], stamped_after - 1)
    if point is None:
        return Hlc(time.time_ns()), positions
    if point.hlc is not None:
        return point.hlc, positions
    [(table, version)] = positions.items()
    commit = sources[table].commits(version - 1, version)[0] if version >= 0 else None
    return Hlc(commit.commit_ns if commit else 0), positions


def version_at(source: DeltaSource, moment: Hlc, latest: int) -> int:
    """The newest version of the table committed at or before `moment` (-1: none), as a timestamp cursor
    starts a feed after it."""
    commits = source.commits(-1, latest)
    return max([c.version for c in commits if c.commit_ns <= moment.wall], default=-1)


def create_job(
    project: Project,
    compiled: CompiledFeed,
    sources: dict[str, DeltaSource],
    store: StateStore,
    sink: Sink,
    log,
    scan_tables: tuple[str, ...] = (),
) -> jobs.Job:
    """`scan_tables`: tables of the feed the job scans alone at its start, as a table added in place is (at
    the version it starts from, above everything emitted before), while following them from there."""
    feed = compiled.feed
    unknown = [t for t in scan_tables if t not in sources]
    if unknown:
        raise RunError(f"feed {feed.name}: --scan-table {unknown[0]} is not one of its tables ({', '.join(sources)})")
    try:
        start, positions = start_point(feed.name, compiled.options, sources, store)
        follows = compiled.options.initial_scan != InitialScan.ONLY
        for table, source in sources.items():
            source.check_readable(max(positions[table], 0), changes=follows)
    except SourceError as exc:
        raise RunError(f"feed {feed.name}: {exc}") from None
    _below_resolved(feed.name, start, sink)
    sink_def = compiled.sink_display
    spans = {t: project.tables[t].spans or default_spans(project) for t in sources}
    # Beyond what the hash covers: what `feedctl plan` compares with (sink settings, redacted; metadata).
    definition = JobDefinition(
        tables=tuple(compiled.tables),
        sql=compiled.sql,
        options=compiled.options,
        sink=sink_def["name"],
        columns=compiled.columns,
        keys=declared_keys(project, compiled.tables),
        sink_display=compiled.sink_display,
        metadata=metadata(compiled),
        view=view(project, compiled),
        table_changes=tuple(TableChange(t, TableOp.ADDED, positions[t], scan=True) for t in scan_tables),
    )
    try:
        with store.transaction() as conn:
            job = jobs.create_job(
                conn,
                feed.name,
                compiled.definition_hash,
                definition,
                sink_def["uri"],
                start,
                {t: (positions[t], spans[t]) for t in sources},
                feed.version,
            )
            # Ticked last: the store's sequence stays locked from a tick to its commit, for every node. Ticked
            # before the job's rows were written, most of the feeds three nodes were starting waited for it.
            definition = replace(definition, view_since=sequence.tick(conn))
            jobs.set_definition(conn, job.job_id, job.lease_epoch, definition)
            job = replace(job, definition_json=jobs.stored(definition))
    except (jobs.JobExists, IntegrityError):  # another node created the feed's job first: run that one
        with store.transaction() as conn:
            return jobs.newest_job(conn, feed.name, feed.version)
    scans = f"; {', '.join(scan_tables)} scanned alone first" if scan_tables else ""
    into = f", into {sink_def['uri']}" if job.version > 1 else ""  # a location of its own (redacted)
    log(
        f"created job {job.job_id} for feed {job.label} at {start.for_people()}{into}{scans}",
        event="job_created",
        job_id=job.job_id,
        feed=feed.name,
        version=job.version,
        start=str(start),
        scan_tables=list(scan_tables),
    )
    return job


def starting(compiled: CompiledFeed, settings, previous: jobs.Job | None, sink: Sink) -> CompiledFeed:
    """The feed as a new job starts it: at `settings.cursor`, or with `settings.continue_job` at the previous
    job's high-water mark, else as the feed says. A scan into the sink a previous job emitted into needs
    `settings.rescan`."""
    name, cursor = compiled.feed.name, settings.cursor
    if settings.continue_job:
        point = continue_point(previous) if previous is not None else None
        if point is None:
            raise RunError(
                f"feed {name}: --continue starts where the previous job stopped, and "
                + (
                    "the feed has no job"
                    if previous is None
                    else f"its job {previous.job_id} stopped in its initial scan: add --rescan"
                )
            )
        cursor = str(point)
    options = compiled.options
    if cursor is not None:
        options = options.with_values(
            {"cursor": cursor, "initial_scan": compiled.feed.options.get("initial_scan", "no")}
        )
    if (
        previous is not None
        and previous.high_water.wall
        and options.cursor is None
        and options.scans
        and not settings.rescan
    ):
        raise RunError(
            f"feed {name}: its job {previous.job_id} emitted every change up to "
            f"{previous.high_water} into {sink.uri}; a new job without a cursor scans its "
            f"tables into it again. `feedctl run --new-job --continue -s {name}` continues from "
            f"there without a scan; add --rescan to scan again."
        )
    return replace(compiled, options=options)


def continue_point(job: jobs.Job) -> Hlc | None:
    """Where a new job continues `job` without loss: its high-water mark, or, before it moved, its start when
    it scans nothing (None: its initial scan was under way, so a new job scans again)."""
    if job.high_water.wall:
        return job.high_water
    return job.start if definition_of(job).options.initial_scan == InitialScan.NO else None


def _below_resolved(feed: str, start: Hlc, sink: Sink) -> None:
    """A job starting at `start` writes files named from just after it: refused when the sink's folder holds
    a later RESOLVED file, from any job, which its consumers may have read up to (they would never see the
    files that sort below it)."""
    newest = sink.newest_resolved()
    if newest is not None and start < newest[1]:
        name, resolved = newest
        raise RunError(
            f"feed {feed}: a new job starting at {start} would write files that sort below {name} in "
            f"{sink.uri}, which a consumer that read up to it never reads. Start it at or after "
            f"that (`--cursor {resolved}`), or give the feed a new sink folder."
        )


def stopped(job: jobs.Job) -> tuple[str, str]:
    """Why a job that is not running does not run: (note, error); the error stands while the job is paused
    or failed, so that the run exits 1."""
    again = f"`feedctl run --new-job -s {job.feed}` starts a new job"
    failed = f"failed: {job.error}" if "feedctl " in job.error else f"failed: {job.error}; {again}"  # one next step
    note = {
        JobStatus.PAUSED: f"paused; `feedctl resume {job.feed}` to continue",
        JobStatus.FAILED: failed,
        JobStatus.CANCELED: f"canceled; {again}",
        JobStatus.SUCCEEDED: "finished",
    }.get(job.status, job.status)
    return note, job.error if job.status in (JobStatus.PAUSED, JobStatus.FAILED) else ""
