"""A job's definition as it changes: what a node's copy of the project says of a feed (`view`), what a running
job takes of it in place as its next revision, and what it refuses (a definition it was not created with)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from feedctl.compiler.compile import CompiledFeed, definition_hash
from feedctl.errors import RunError
from feedctl.job import option_change
from feedctl.job.definition import definition_of
from feedctl.job.key_change import Key
from feedctl.job.option_change import OptionChange
from feedctl.job.placement import default_spans
from feedctl.job.table_change import TableChange, TableOp
from feedctl.options import InitialScan
from feedctl.project.model import Project
from feedctl.source.delta import SourceError, of_table
from feedctl.state import batch_intents, checkpoints, jobs, sequence
from feedctl.state.store import StateStore


def metadata(compiled: CompiledFeed) -> dict:
    feed = compiled.feed
    return {"description": feed.description, "tags": feed.tags, "meta": feed.meta}


@dataclass(frozen=True)
class Wanted:
    """A node's copy of the project, for one feed: what its coordinator records on the job once every node
    running the feed has the same `view` (`job/rollout.py`)."""

    project: Project
    compiled: CompiledFeed
    view: str
    declared: dict[str, Key]  # the keys it declares of the tables the node reads for the job


def view(project: Project, compiled: CompiledFeed) -> str:
    """What this copy of the project says of the feed, as a job takes it (`job/rollout.py`): its
    definition hash (what a job cannot take in place), tables, in-place options, description, tags and meta,
    and the tables' keys."""
    body = {
        "hash": compiled.definition_hash,
        "tables": sorted(compiled.tables),
        "metadata": metadata(compiled),
        "options": compiled.options.in_place(),
        "keys": {t: k.to_json() for t, k in declared_keys(project, compiled.tables).items()},
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
        tables = definition_of(jobs.get_job(conn, job_id)).tables
    added = [t for t in compiled.tables if t not in tables] if compiled.sql is None else []
    versions = {}
    for table in added:  # read before the transaction: the version each is followed from
        source = of_table(table, project.tables[table])
        try:
            versions[table] = source.latest_version()
            source.check_readable(max(versions[table], 0), changes=compiled.options.initial_scan != InitialScan.ONLY)
        except SourceError as exc:
            raise RunError(f"feed {name}: {exc}") from None
    made: list[OptionChange] = []
    changed: list[TableChange] = []
    with store.transaction() as conn:
        if job_id not in jobs.fence(conn, [(job_id, epoch)]):
            raise jobs.refusal(conn, job_id, epoch)
        job = jobs.get_job(conn, job_id)
        was, now = option_change.differing(definition_of(job).options, compiled.options)
        definition = definition_of(job).revised(metadata(compiled), view(project, compiled), sequence.tick(conn))
        if now:
            last = batch_intents.last_cut(conn, job_id)
            made.append(OptionChange(last[0] + 1 if last else 1, last[1] if last else None, was, now, node))
            definition = definition.with_option_change(made[0])
        dropped = [t for t in definition_of(job).tables if t not in compiled.tables] if compiled.sql is None else []
        if added or dropped:  # fenced: nothing changed the job since `added` was read
            scan = definition_of(job).options.initial_scan == InitialScan.YES
            for table in added:
                checkpoints.add_table(
                    conn, job_id, table, versions[table], project.tables[table].spans or default_spans(project)
                )
                changed.append(TableChange(table, TableOp.ADDED, versions[table], scan))
            changed.extend(
                TableChange(t, TableOp.DROPPED, batch_intents.last_cut_version(conn, job_id, t)) for t in dropped
            )
            definition = definition.with_table_changes(list(compiled.tables), changed, declared_keys(project, added))
        jobs.set_definition(conn, job_id, epoch, definition, compiled.definition_hash)
        job = jobs.get_job(conn, job_id)
    log(
        f"{name}: job {job_id} takes revision {definition.revision} of its definition, which every node running it has",
        event="job_revised",
        feed=name,
        job_id=job_id,
        revision=definition.revision,
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


def declared_keys(project: Project, tables: list[str]) -> dict[str, Key]:
    """What places each table's rows in spans, as project.yml declares it."""
    return {t: Key.of(project.tables[t].primary_key, project.tables[t].region_column) for t in tables}


def check_definition(job: jobs.Job, compiled: CompiledFeed, project: Project) -> None:
    """A job runs the definition it was created with, or nothing. A table's key may change under it
    (`job/key_change.py`), but not back to a key it left, nor under a CDC query."""
    name = compiled.feed.name
    again = (
        [t for t in compiled.tables if t not in definition_of(job).tables and t in definition_of(job).tables_ever()]
        if compiled.sql is None
        else []
    )
    if again:
        raise RunError(
            f"feed {name}: {again[0]} was dropped from its job {job.job_id}; a table is not added "
            f"back to a job in place. Cancel the job (`feedctl cancel {name}`), then `feedctl run "
            f"--new-job --continue -s {name}`."
        )
    recorded = definition_of(job).keys  # jobs created before keys were recorded: not compared
    for table, now in declared_keys(project, [t for t in compiled.tables if t in recorded]).items():
        if now == recorded[table]:
            continue
        left = definition_of(job).key_left(table, now)
        if left is not None:
            raise RunError(
                f"project.yml declares the key {now.describe()} of {table}, which job "
                f"{job.job_id} of feed {name} left at version {left.version} for "
                f"{left.after.describe()}: is this an older copy of the project?"
            )
        if compiled.sql is not None:
            raise RunError(
                f"the primary key or region column of {table} changed in project.yml since job {job.job_id} of "
                f"feed {name} was created ({recorded[table].describe()} → {now.describe()}): "
                f"a key change under a CDC query is not yet taken as a schema change. Cancel the job (`feedctl "
                f"cancel {name}`), then `feedctl run --new-job --continue -s {name}` continues from its "
                f"high-water mark {job.high_water}; or restore the key."
            )
    if (
        compiled.definition_hash == job.definition_hash
        or definition_hash(compiled, definition_of(job).options, definition_of(job).tables) == job.definition_hash
    ):  # an older job's hash
        return
    raise RunError(
        f"feed {name} changed since its job {job.job_id} was created (definition "
        f"{job.definition_hash[:19]} → {compiled.definition_hash[:19]}). To run the new definition, "
        f"cancel the job (`feedctl cancel {name}`), then `feedctl run --new-job --continue -s {name}`: a new job "
        f"continues from its high-water mark {job.high_water}. Or restore the previous definition."
    )
