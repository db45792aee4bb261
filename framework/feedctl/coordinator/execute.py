"""Execute one batch intent: stage each table's changes (or initial-scan rows), then run the Spark batch.

An intent names fixed version ranges and a target timestamp, and every event timestamp is already
recorded, so executing it again after a crash reads the same rows and writes the same files.
"""

from __future__ import annotations

import os
import shutil
import uuid
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from feedctl.aggregator import spans
from feedctl.aggregator.batch import TableBatch, run_batch
from feedctl.aggregator.emit import EmitConfig
from feedctl.aggregator.snapshot_scan import SnapshotScan
from feedctl.encoding.json import JsonSpec
from feedctl.sinks import kafka, naming, store_options, webhook
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.source.stage import Staged, VersionTimes, stage_changes
from feedctl.state.progress import Intent, Recorded
from feedctl.units import Hlc, parse_size

if TYPE_CHECKING:
    from feedctl.coordinator.stage_ahead import NextBatch, StageAhead


@dataclass
class FeedPlan:
    """What the coordinator knows of a feed, fixed for the life of its job."""

    job_id: int
    sources: dict[str, DeltaSource]
    keys: dict[str, list[str]]
    columns: dict[str, list[str] | None]  # pushdown: columns to read (None: all)
    spans: dict[str, int]
    sql: str | None
    options: dict
    sink_uri: str
    sink_kind: str  # cloudstorage | kafka | webhook | null
    sink_options: dict  # defaults filled in (project.options.resolve_sink)
    project_root: str
    start: Hlc
    stage_root: Path


@dataclass
class BatchResult:
    files: int = 0
    messages: int = 0
    bytes: int = 0
    rows_read: int = 0  # change rows staged (a scan's tasks read the table themselves: none)

    def to_json(self) -> dict:
        return asdict(self)


def schema_id(schema: pa.Schema) -> int:
    """Changes whenever the table's schema changes, so a file never mixes two schemas."""
    return zlib.crc32(schema.to_string(show_schema_metadata=False).encode())


def topic(plan: FeedPlan, table: str) -> str:
    return naming.topic_name(table, bool(plan.options["full_table_name"]), plan.sink_uri, plan.sink_options)


def _emit_config(plan: FeedPlan, table: str, batch_seq: int, schema: int) -> EmitConfig:
    opts = plan.sink_options
    kind = plan.sink_kind
    sink_config = {}
    if kind == "kafka":
        sink_config = {"producer": kafka.producer_config(plan.sink_uri, opts), "headers": kafka.headers(opts)}
    elif kind == "webhook":
        sink_config = webhook.sink_config(plan.sink_uri, opts)
    return EmitConfig(
        table=table, topic=topic(plan, table), schema_id=schema, job_id=plan.job_id, batch_seq=batch_seq,
        uri=plan.sink_uri, project_root=plan.project_root,
        # Resolved here, in the driver: the executors may not share its environment.
        storage_options=store_options.filesystem_options(plan.sink_uri, opts["storage_options"], os.environ)
        if kind == "cloudstorage" else {},
        file_size=parse_size(opts["file_size"]), partition_format=opts["partition_format"],
        compression=opts["compression"], spec=asdict(JsonSpec.from_options(plan.options)),
        format=plan.options["format"], kind=kind,
        sink_config=sink_config)


def stage_table(plan: FeedPlan, table: str, after: int, up_to: int, recorded: list[Recorded], folder: Path,
                source: DeltaSource | None = None) -> Staged:
    """Stage one table's changes in (after, up_to] under `folder`, stamped with their recorded event
    timestamps. The range fixes what is staged."""
    source = source or plan.sources[table]
    times = VersionTimes([e.version for e in recorded], [e.event_ts for e in recorded],
                         [e.commit_ns for e in recorded])
    return stage_changes(source.changes(after, up_to, plan.columns.get(table)), times, folder / table,
                         partial(spans.of_batch, key=plan.keys[table], spans=plan.spans[table]))


def snapshot_scan(plan: FeedPlan, table: str, version: int) -> SnapshotScan:
    """An initial scan of the table at `version`, which the span tasks read themselves."""
    source = plan.sources[table]
    return SnapshotScan(table, source.location, source.storage_options, version, plan.columns.get(table),
                        (plan.start.wall, plan.start.logical), _commit_ns(source, version, plan.start),
                        plan.spans[table])


def stage_folder(plan: FeedPlan, batch_seq: int) -> Path:
    """A folder of its own per staging: a second runner (after a lost lease) never reads half of ours.
    Everything under the batch's folder goes when the batch is checkpointed (`clean_stage`)."""
    return plan.stage_root / str(plan.job_id) / str(batch_seq) / uuid.uuid4().hex[:12]


def execute(spark: Callable, plan: FeedPlan, intent: Intent, recorded: dict[str, list[Recorded]],
            ahead: StageAhead | None = None, next_batch: NextBatch | None = None) -> BatchResult:
    """Write the intent's messages; `recorded` holds each table's event timestamps for its range. `spark()`
    gives the session, waited for only once the changes are staged. Tables that `ahead` already staged are
    taken from it; once this batch is staged, `ahead` starts staging `next_batch` while Spark writes."""
    folder = stage_folder(plan, intent.batch_seq)
    batches, result = [], BatchResult()
    for table, (after, up_to) in sorted(intent.ranges.items()):
        schema = plan.sources[table].schema(up_to)
        if intent.kind == "scan":
            scan = snapshot_scan(plan, table, up_to)
            changes, rows = scan, scan.rows_schema(schema)
        else:
            staged = ahead.take(table, after, up_to) if ahead else None
            if staged is None:
                staged = stage_table(plan, table, after, up_to, recorded.get(table, []), folder)
            result.rows_read += staged.rows
            if staged.path is None:
                continue
            changes, rows = staged.path, staged.schema
        columns = plan.columns.get(table)
        read = [c for c in schema.names if columns is None or c in columns]
        batches.append(TableBatch(table, changes, rows, read, plan.keys[table], plan.spans[table], plan.sql,
                                  _emit_config(plan, table, intent.batch_seq, schema_id(schema))))
    if ahead and next_batch:
        ahead.start(next_batch)
    files = run_batch(spark(), batches, intent.batch_seq, str(plan.start), bool(plan.options["diff"])) \
        if batches else []
    result.files = sum(1 for f in files if f["file"])
    result.messages = sum(f["messages"] for f in files)
    result.bytes = sum(f["bytes"] for f in files)
    return result


def _commit_ns(source: DeltaSource, version: int, fallback: Hlc) -> int:
    """The commit time of a scanned version, for `mvcc_timestamp`; the job's start if its log is gone."""
    try:
        return source.commits(version - 1, version)[0].commit_ns if version >= 0 else fallback.wall
    except SourceError:
        return fallback.wall


def clean_stage(plan: FeedPlan, intent: Intent) -> None:
    shutil.rmtree(plan.stage_root / str(plan.job_id) / str(intent.batch_seq), ignore_errors=True)
