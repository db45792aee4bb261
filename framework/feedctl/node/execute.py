"""Execute a node's share of one batch intent: stage its spans' changes of each table (an initial scan
stages nothing), describe each table's share of the batch for its Spark tasks, and run it.

An intent names fixed version ranges and a target timestamp, and every event timestamp is already
recorded, so executing it again after a crash reads the same rows and writes the same files.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import pyarrow as pa

from feedctl.compiler.pushdown import Pushdown, with_regions
from feedctl.encoding.envelope import Envelope
from feedctl.node.batch_progress import BatchProgress
from feedctl.node.share import Batch
from feedctl.options import SchemaChangeAction
from feedctl.sinks.sink import Sink
from feedctl.source.at_schema_change import AtSchemaChange
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.source.snapshot import SnapshotScan
from feedctl.source.spans import Regions
from feedctl.source.stage import Stager
from feedctl.source.stage_ahead import StageAhead
from feedctl.state.batch_intents import IntentKind
from feedctl.state.event_times import Recorded
from feedctl.tasks.batch import BatchPart, TableBatch
from feedctl.tasks.query import json_outputs
from feedctl.units import Hlc, plural, size_text


@dataclass(frozen=True)
class FeedPlan:
    """What a node knows of a feed's job for all its batches (each batch brings its own keys and options)."""

    job_id: int
    sources: dict[str, DeltaSource]
    pushdown: dict[str, Pushdown]  # per table: the columns to read and what to skip
    spans: dict[str, int]
    sql: str | None
    sink: Sink
    start: Hlc
    stager: Stager


@dataclass
class BatchResult:
    files: int = 0
    messages: int = 0
    emitted_bytes: int = 0  # the messages as encoded
    bytes: int = 0  # as the sink stored or sent them (files framed and compressed)
    rows_read: int = 0  # change rows read and staged (a scan's tasks read the table themselves: none)
    rows_shared: int = 0  # change rows taken from what another feed's batch read and staged, or from the versions
    # the node kept (`source/version_cache.py`)
    files_read: int = 0  # a scan's data files, and their bytes, after pushdown...
    bytes_read: int = 0
    files_total: int = 0  # ...of the whole snapshot
    bytes_total: int = 0

    def to_json(self) -> dict:
        return asdict(self)

    def plus(self, other: BatchResult) -> BatchResult:
        return BatchResult(**{k: v + getattr(other, k) for k, v in asdict(self).items()})

    def describe(self) -> str:
        """`emitted 3 messages in 1 file; read 2 of 9 data files (1.2 MiB of 4.0 MiB)`."""
        read = (
            f"; read {self.files_read} of {plural(self.files_total, 'data file')} ({size_text(self.bytes_read)} "
            f"of {size_text(self.bytes_total)})"
            if self.files_total
            else ""
        )
        return f"emitted {plural(self.messages, 'message')} in {plural(self.files, 'file')}{read}"


def schema_id(schema: pa.Schema) -> int:
    """Changes whenever the table's schema changes, so a file never mixes two schemas."""
    return zlib.crc32(schema.to_string(show_schema_metadata=False).encode())


def snapshot_scan(
    plan: FeedPlan,
    table: str,
    version: int,
    regions: Regions | None,
    at: Recorded | None = None,
    event: Hlc | None = None,
) -> SnapshotScan:
    """A scan of the table at `version`, which the span tasks read themselves: a scan intent's at its target
    `event` (the job's start for the initial scan; above every earlier batch for a table added since), or a
    backfill at the event timestamp of the version `at`."""
    source, pushdown = plan.sources[table], plan.pushdown[table]
    filters = (
        {slot: with_regions(pushdown.scan_filter, regions.column, {value}) for value, slot in regions.slots.items()}
        if regions
        else None
    )
    event = at.event_ts if at else event or plan.start
    return SnapshotScan(
        table,
        source.location,
        source.task_options(),
        version,
        pushdown.columns,
        pushdown.scan_filter,
        (event.wall, event.logical),
        at.commit_ns if at else _commit_ns(source, version, plan.start),
        plan.spans[table],
        regions,
        filters,
    )


def _reading(
    plan: FeedPlan, scan: SnapshotScan, spans: list[int], result: BatchResult, progress: BatchProgress | None
) -> None:
    """Count the data files (and bytes) the spans' tasks open of the scanned snapshot, and of the whole;
    the rows they hold are what `progress` expects."""
    read = (
        scan.predicate
        if scan.regions is None
        else with_regions(scan.predicate, scan.regions.column, scan.regions.of(spans, scan.shares))
    )
    files = plan.sources[scan.table].snapshot_files(scan.version, read)
    result.files_read, result.bytes_read = result.files_read + files.files, result.bytes_read + files.bytes
    result.files_total, result.bytes_total = result.files_total + files.all_files, result.bytes_total + files.all_bytes
    if progress is not None:  # each task keeps its spans' share of the rows it reads
        progress.expect(
            files.rows * len(spans) // max(plan.spans[scan.table], 1) if scan.regions is None else files.rows
        )


def execute(
    run: Callable[[list[TableBatch]], list[dict]],
    plan: FeedPlan,
    batch: Batch,
    ahead: StageAhead | None = None,
    progress: BatchProgress | None = None,
) -> dict[int, BatchResult]:
    """Write `batch`'s messages of this node's spans (a catch-up's later batches after the first: changes
        only, no CDC query). `run` emits the tables staged (`node/spark_jobs.py`: in one Spark job with other feeds'
    batches due together), so the session is waited for only once they are. Tables
        that `ahead` already staged are taken from it; once this batch is staged, `ahead` starts staging the
        batch after it while Spark writes. Its tasks tell `progress` how far they are. Returns what each batch
        wrote."""
    options, intent, mine = batch.options, batch.first, batch.share
    envelope = Envelope.from_options(options)
    start_hlc = str(plan.start)
    intents = batch.parts()
    if progress is not None:
        progress.attempt()
    batches, results = [], {i.batch_seq: BatchResult() for i, _ in intents}

    def target(table: str, version: int, batch_seq: int):
        schema, variants = plan.sources[table].schema(version), plan.sources[table].layout(version).variants
        json_columns = json_outputs(plan.sql, columns(table, schema), variants)
        return replace(
            plan.sink.target(
                table,
                plan.sink.topic(table, options.full_table_name),
                schema_id(schema),
                plan.job_id,
                batch_seq,
                options.format,
                replace(envelope, json_columns=json_columns) if json_columns else envelope,
            ),
            progress=progress.address if progress else None,
        )

    def columns(table: str, schema: pa.Schema) -> list[str]:
        read = plan.pushdown[table].columns
        return [c for c in schema.names if read is None or c in read]

    for table in sorted({t for i, _ in intents for t in i.ranges}):  # a batch cuts only the tables that changed
        spans = mine.get(table)
        if not spans:
            continue
        layout = batch.layouts[table]
        if intent.kind == IntentKind.SCAN:
            up_to = intent.ranges[table][1]
            if up_to < 0:  # no version yet where the job starts (made after its cursor): nothing to scan
                continue
            schema = plan.sources[table].schema(up_to)
            scan = snapshot_scan(plan, table, up_to, layout.regions, event=intent.target)
            _reading(plan, scan, spans, results[intent.batch_seq], progress)
            batches.append(
                TableBatch(
                    table,
                    scan,
                    scan.rows_schema(schema),
                    columns(table, schema),
                    plan.sources[table].names_at(up_to, layout.key),
                    spans,
                    plan.sql,
                    target(table, up_to, intent.batch_seq),
                    start_hlc,
                    options.diff,
                )
            )
            continue
        parts, rows = [], None
        for each, each_recorded in intents:
            if table not in each.ranges:
                continue
            after, up_to = each.ranges[table]
            staged = ahead.take(table, after, up_to, spans) if ahead and each is intent else None
            if staged is None:
                staged = plan.stager.stage(
                    table, after, up_to, each_recorded.get(table, []), each.batch_seq, layout, keep=spans
                )
            results[each.batch_seq].rows_read += staged.rows_read
            results[each.batch_seq].rows_shared += staged.rows - staged.rows_read
            if progress is not None:
                progress.expect(staged.rows)
            schema = plan.sources[table].schema(up_to)
            changed = staged.spans() if staged.path is not None else None
            policy = each.schema_changes.get(table)
            if policy is not None:  # the version changing the table's schema: the table's only one in the batch
                backfill = (
                    snapshot_scan(plan, table, up_to, layout.regions, each_recorded[table][-1])
                    if policy == SchemaChangeAction.BACKFILL
                    else None
                )
                if backfill is not None:
                    _reading(plan, backfill, spans, results[each.batch_seq], progress)
                compared = [c for c in columns(table, schema) if c in plan.sources[table].schema(after).names]
                changed = AtSchemaChange(changed, compared, backfill) if changed or backfill else None
            if changed is not None:
                key = plan.sources[table].names_at(up_to, layout.key)  # a key renamed since, under its name then
                parts.append(BatchPart(changed, columns(table, schema), key, target(table, up_to, each.batch_seq)))
                if rows is None:
                    rows = staged.schema if staged.path is not None else changed.backfill.rows_schema(schema)
        if parts:
            first, *rest = parts
            batches.append(
                TableBatch(
                    table,
                    first.changes,
                    rows,
                    first.columns,
                    first.key,
                    spans,
                    plan.sql,
                    first.target,
                    start_hlc,
                    options.diff,
                    tuple(rest),
                )
            )
    if ahead and batch.following:
        ahead.start(batch.following)
    files = run(batches) if batches else []
    for f in files:
        r = results[f["batch"]]
        r.files += 1 if f["file"] else 0
        r.messages += f["messages"]
        r.emitted_bytes += f["emitted"]
        r.bytes += f["bytes"]
    return results


def _commit_ns(source: DeltaSource, version: int, fallback: Hlc) -> int:
    """The commit time of a scanned version, for `mvcc_timestamp`; the job's start if its log is gone."""
    try:
        return source.commits(version - 1, version)[0].commit_ns if version >= 0 else fallback.wall
    except SourceError:
        return fallback.wall
