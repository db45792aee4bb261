"""A feed's job: created where the feed says to start (now, or after its cursor), found again by later runs,
and refused when the feed's definition changed under it."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace

from sqlalchemy.exc import IntegrityError

from feedctl.compiler.compile import CompiledFeed, definition_hash
from feedctl.coordinator import option_change, table_change
from feedctl.coordinator.placement import default_spans
from feedctl.project.model import Project
from feedctl.project.options import IN_PLACE_OPTIONS
from feedctl.sinks.sink import Sink
from feedctl.source import key_change
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.state import jobs, progress, sequence
from feedctl.state.store import StateStore
from feedctl.units import Hlc, parse_timestamp
from feedctl.state.jobs import JobStatus


class RunError(Exception):
    """A feed cannot run as asked; the message says why and what to do."""


def start_point(
    feed: str, options: dict, sources: dict[str, DeltaSource], store: StateStore
) -> tuple[Hlc, dict[str, int]]:
    """Where a new job starts: each table's latest version and the time after reading them (a commit
    landing meanwhile gets a later event timestamp, so it is emitted), or after the cursor."""
    cursor = options.get("cursor")
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
        follows = compiled.options["initial_scan"] != "only"
        for table, source in sources.items():
            source.check_readable(max(positions[table], 0), changes=follows)
    except SourceError as exc:
        raise RunError(f"feed {feed.name}: {exc}") from None
    _below_resolved(feed.name, start, sink)
    sink_def = compiled.sink_display
    spans = {t: project.tables[t].spans or default_spans(project) for t in sources}
    # Beyond what the hash covers: what `feedctl plan` compares with (sink settings, redacted; metadata).
    definition = {
        "tables": compiled.tables,
        "sql": compiled.sql,
        "options": compiled.options,
        "sink": sink_def["name"],
        "columns": compiled.columns,
        "keys": declared_keys(project, compiled.tables),
        "sink_display": compiled.sink_display,
        "metadata": metadata(compiled),
        "view": view(project, compiled),
        "revision": 1,
        "table_changes": [table_change.TableChange(t, "added", positions[t], scan=True).to_json() for t in scan_tables],
    }
    try:
        with store.transaction() as conn:
            definition["view_since"] = sequence.tick(conn)
            job = jobs.create_job(
                conn,
                feed.name,
                compiled.definition_hash,
                definition,
                sink_def["uri"],
                start,
                {t: (positions[t], spans[t]) for t in sources},
            )
    except (jobs.JobExists, IntegrityError):  # another node created the feed's job first: run that one
        with store.transaction() as conn:
            return jobs.newest_job(conn, feed.name)
    scans = f"; {', '.join(scan_tables)} scanned alone first" if scan_tables else ""
    log(
        f"created job {job.job_id} for feed {feed.name} at {start.for_people()}{scans}",
        event="job_created",
        job_id=job.job_id,
        feed=feed.name,
        start=str(start),
        scan_tables=list(scan_tables),
    )
    return job


def metadata(compiled: CompiledFeed) -> dict:
    feed = compiled.feed
    return {"description": feed.description, "tags": feed.tags, "meta": feed.meta}


@dataclass(frozen=True)
class Wanted:
    """A node's copy of the project, for one feed: what its coordinator records on the job once every node
    running the feed has the same `view` (`coordinator/rollout.py`)."""

    project: Project
    compiled: CompiledFeed
    view: str
    declared: dict[str, dict]  # the keys it declares of the tables the node reads for the job


def view(project: Project, compiled: CompiledFeed) -> str:
    """What this copy of the project says of the feed, as a job takes it (`coordinator/rollout.py`): its
    definition hash (what a job cannot take in place), tables, in-place options, description, tags and meta,
    and the tables' keys."""
    body = {
        "hash": compiled.definition_hash,
        "tables": sorted(compiled.tables),
        "metadata": metadata(compiled),
        "options": {k: compiled.options.get(k) for k in IN_PLACE_OPTIONS},
        "keys": declared_keys(project, compiled.tables),
    }
    return "view:" + hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def apply_in_place(
    store: StateStore, project: Project, job_id: int, compiled: CompiledFeed, node: str, epoch: int, log
) -> jobs.Job:
    """What the project changed of a running job that the job takes in place: options (`IN_PLACE_OPTIONS`),
    in force from the first batch not yet cut; a plain feed's tables added or dropped (`table_change`); and
    description, tags and meta. Recorded by the job's coordinator, fenced by its lease's `epoch`, once every
    node running the feed has this project (`rollout`), as the job's next revision; the job keeps its id and
    high-water mark, and every node emits under what the job records."""
    name = compiled.feed.name
    with store.reading() as conn:
        tables = jobs.get_job(conn, job_id).definition["tables"]
    added = [t for t in compiled.tables if t not in tables] if compiled.sql is None else []
    versions = {}
    for table in added:  # read before the transaction: the version each is followed from
        source = DeltaSource(table, project.tables[table].location, project.tables[table].storage_options)
        try:
            versions[table] = source.latest_version()
            source.check_readable(max(versions[table], 0), changes=compiled.options["initial_scan"] != "only")
        except SourceError as exc:
            raise RunError(f"feed {name}: {exc}") from None
    made: list[option_change.OptionChange] = []
    changed: list[table_change.TableChange] = []
    with store.transaction() as conn:
        progress.fence(conn, job_id, epoch)
        job = jobs.get_job(conn, job_id)
        was, now = option_change.differing(job.definition["options"], compiled.options)
        definition = {
            **job.definition,
            "metadata": metadata(compiled),
            "view": view(project, compiled),
            "view_since": sequence.tick(conn),
            "revision": revision(job.definition) + 1,
        }
        if now:
            last = progress.last_cut(conn, job_id)
            made.append(
                option_change.OptionChange(last[0] + 1 if last else 1, last[1] if last else None, was, now, node)
            )
            definition = option_change.with_change(definition, made[0])
        dropped = [t for t in job.definition["tables"] if t not in compiled.tables] if compiled.sql is None else []
        if added or dropped:  # fenced: nothing changed the job since `added` was read
            scan = job.definition["options"].get("initial_scan") == "yes"
            for table in added:
                progress.add_table(
                    conn, job_id, table, versions[table], project.tables[table].spans or default_spans(project)
                )
                changed.append(table_change.TableChange(table, "added", versions[table], scan))
            changed.extend(
                table_change.TableChange(t, "dropped", progress.last_cut_version(conn, job_id, t)) for t in dropped
            )
            definition = table_change.with_changes(definition, list(compiled.tables), changed)
            definition["keys"] = {**definition.get("keys", {}), **declared_keys(project, added)}
        jobs.set_definition(conn, job_id, epoch, definition, compiled.definition_hash)
        job = jobs.get_job(conn, job_id)
    log(
        f"{name}: job {job_id} takes revision {revision(definition)} of its definition, which every node running "
        f"it has",
        event="job_revised",
        feed=name,
        job_id=job_id,
        revision=revision(definition),
    )
    for c in made:
        log(
            f"{name}: job {job_id} takes {c.describe()} in place from batch {c.from_batch}",
            event="options_changed",
            feed=name,
            job_id=job_id,
            batch=c.from_batch,
            options=c.now,
        )
    for c in changed:
        log(
            f"{name}: job {job_id}: {c.describe()}",
            event=f"table_{c.op}",
            feed=name,
            job_id=job_id,
            table=c.table,
            version=c.version,
        )
    return job


def revision(definition: dict) -> int:
    """The job's revision: 1 as created, one more for each change of the project it took in place."""
    return definition.get("revision", 1)


def view_since(definition: dict) -> int:
    """The store's sequence number when the job took its revision (0: a job recorded before it was kept)."""
    return definition.get("view_since", 0)


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
    options = dict(compiled.options)
    if cursor is not None:
        options.update(cursor=cursor, initial_scan=compiled.feed.options.get("initial_scan", "no"))
    if (
        previous is not None
        and previous.high_water.wall
        and options["cursor"] is None
        and options["initial_scan"] != "no"
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
    return job.start if job.definition["options"].get("initial_scan") == "no" else None


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


def declared_keys(project: Project, tables: list[str]) -> dict[str, dict]:
    """What places a table's rows in spans: its primary key and region column."""
    return {
        t: {"primary_key": project.tables[t].primary_key, "region_column": project.tables[t].region_column}
        for t in tables
    }


def check_definition(job: jobs.Job, compiled: CompiledFeed, project: Project) -> None:
    """A job runs the definition it was created with, or nothing. A table's key may change under it
    (`source/key_change.py`), but not back to a key it left, nor under a CDC query."""
    name = compiled.feed.name
    again = (
        [t for t in compiled.tables if t not in job.definition["tables"] and t in table_change.ever(job.definition)]
        if compiled.sql is None
        else []
    )
    if again:
        raise RunError(
            f"feed {name}: {again[0]} was dropped from its job {job.job_id}; a table is not added "
            f"back to a job in place. Cancel the job (`feedctl cancel {name}`), then `feedctl run "
            f"--new-job --continue -s {name}`."
        )
    recorded = job.definition.get("keys") or {}  # jobs created before keys were recorded: not compared
    for table, now in declared_keys(project, [t for t in compiled.tables if t in recorded]).items():
        if now == recorded[table]:
            continue
        left = key_change.earlier(job.definition, table, now)
        if left is not None:
            raise RunError(
                f"project.yml declares the key {key_change.describe(now)} of {table}, which job "
                f"{job.job_id} of feed {name} left at version {left.version} for "
                f"{key_change.describe(left.after)}: is this an older copy of the project?"
            )
        if compiled.sql is not None:
            raise RunError(
                f"the primary key or region column of {table} changed in project.yml since job {job.job_id} of "
                f"feed {name} was created ({key_change.describe(recorded[table])} → {key_change.describe(now)}): "
                f"a key change under a CDC query is not yet taken as a schema change. Cancel the job (`feedctl "
                f"cancel {name}`), then `feedctl run --new-job --continue -s {name}` continues from its "
                f"high-water mark {job.high_water}; or restore the key."
            )
    if (
        compiled.definition_hash == job.definition_hash
        or definition_hash(compiled, job.definition) == job.definition_hash
    ):  # an older job's hash
        return
    raise RunError(
        f"feed {name} changed since its job {job.job_id} was created (definition "
        f"{job.definition_hash[:19]} → {compiled.definition_hash[:19]}). To run the new definition, "
        f"cancel the job (`feedctl cancel {name}`), then `feedctl run --new-job --continue -s {name}`: a new job "
        f"continues from its high-water mark {job.high_water}. Or restore the previous definition."
    )
