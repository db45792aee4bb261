"""One batch in Spark: a task per span reads the span's staged changes, orders them by (event timestamp,
key), pairs each commit's before and after images of a key into one change and writes the span's files.

The coordinator stages each table's changes already split by span, so no row crosses the JVM to be
shuffled or sorted: Spark schedules a task per span, up to as many tasks as it has cores (a partition each,
holding its spans' numbers; a task writes its spans one after the other), and a span's files have exactly
one writer. A feed with a CDC query hands the paired changes to Spark, which runs the query over them (a
filter and a projection keep each task's order), and writes what it selects. An initial scan stages
nothing: each task reads its share of the snapshot itself (`source.snapshot`).

A task hands its messages to the sink's writer in emission order and returns only once the sink has
acknowledged everything it wrote: one result per file written (per span for sinks without files).

A span catching up (moved from a dead node, behind the others) emits the batches it missed in one job: its
task writes them one after the other, each batch acknowledged before the next starts, under the names each
batch has on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial, reduce

import polars as pl
import pyarrow as pa

from feedctl import frame
from feedctl.diagnostics import first_line
from feedctl.errors import TerminalError, Unavailable, unavailable
from feedctl.sinks.registry import writer
from feedctl.sinks.sink import TaskTarget
from feedctl.source.at_schema_change import AtSchemaChange
from feedctl.source.snapshot import SnapshotScan
from feedctl.source.stage import StagedSpans
from feedctl.spark import cores
from feedctl.tasks import pairing, query
from feedctl.tasks.shared_views import SharedViews
from feedctl.tasks.task_progress import Beacon

RESULT_SCHEMA = pa.schema(
    [
        ("table", pa.string()),
        ("span", pa.int32()),
        ("file", pa.string()),
        ("messages", pa.int64()),
        ("emitted", pa.int64()),  # bytes of the messages as encoded
        ("bytes", pa.int64()),  # bytes as the sink stored or sent them
        ("min_wall", pa.int64()),
        ("min_logical", pa.int32()),
        ("max_wall", pa.int64()),
        ("max_logical", pa.int32()),
        ("error", pa.string()),  # set on the one record of a task that met what no retry fixes
        ("batch", pa.int64()),  # the batch the file belongs to (a catch-up writes several)
        ("owner", pa.int32()),  # whose tables these are, of the feeds' batches that share the job
        ("terminal", pa.bool_()),  # an error no retry fixes; else one that a retry of the batch may
        ("unavailable", pa.bool_()),  # an error saying a part is away (a sink, a store): an outage
    ]
)
RESULT_DDL = (
    "`table` string, span int, file string, messages bigint, emitted bigint, bytes bigint, min_wall bigint, "
    "min_logical int, max_wall bigint, max_logical int, error string, batch bigint, owner int, terminal boolean, "
    "unavailable boolean"
)


class TaskFailed(Exception):
    """A task of the batch met an error that a retry of the batch may fix (a file not there yet): said as
    the task's result, so that the feeds sharing its Spark job are not failed with it."""


class TaskUnavailable(TaskFailed, Unavailable):
    """A task of the batch found a part away (its sink, an object store): an outage."""


def _failed(exc: Exception, owner: int) -> dict:
    terminal = isinstance(exc, TerminalError)
    text = str(exc) if terminal else f"{type(exc).__name__}: {first_line(exc)}"
    return {"error": text, "terminal": terminal, "unavailable": not terminal and unavailable(exc), "owner": owner}


def emit_spans(
    spans: Iterable[int],
    parts: list[BatchPart],
    diff: bool,
    owner: int = 0,
    views: SharedViews | None = None,
) -> list[dict]:
    """Task body of a feed without a CDC query: each span the task was handed, read from its staged file (or
    its share of a scanned snapshot), paired and written; batch after batch when it catches up. One result
    per file written; an error, the task's only result. `views`: the node's messages of shared stagings'
    spans, when the node writes the batch itself."""
    spans = list(spans)
    results = []
    try:
        for part in parts:
            sink = writer(part.target)
            beacon = Beacon(sink)
            for span in spans:
                for messages, shared in _messages(part, span, diff, views):
                    how = sink.encoding() if shared is not None else None
                    if how is None:
                        sink.add(messages)
                    else:  # the feeds writing these messages this way encode them once
                        encode = partial(sink.encode, messages)
                        sink.add_encoded(messages, views.encoded((shared, how), encode, messages.height))
                    beacon.add(messages.height)
            results += [{**result, "batch": part.target.batch_seq, "owner": owner} for result in sink.finish()]
            beacon.close()
    except Exception as exc:
        return [_failed(exc, owner)]
    return results


def _messages(part: BatchPart, span: int, diff: bool, views: SharedViews | None):
    """The span's messages of the batch, piece by piece, each with what names it among the node's feeds (None:
    the feed's own); paired once for the node's feeds when they come from a shared staging (`views`)."""
    changes, key = part.changes, part.key
    if views is None or not (isinstance(changes, StagedSpans) and changes.shared):
        for view in pairing.task_changes(changes, span, part.columns, key):
            yield pairing.messages(view, part.columns, diff), None
        return
    named = (changes.path, span, tuple(part.columns), tuple(key), diff)
    frames = views.messages(
        named,
        lambda: [
            pairing.messages(view, part.columns, diff)
            for view in pairing.task_changes(changes, span, part.columns, key)
        ],
    )
    for n, messages in enumerate(frames):
        yield messages, (named, n)


def emit_span_places(batches, parts: list[BatchPart], span_ids: list[int], diff: bool, owner: int = 0):
    """mapInArrow body of a feed without a CDC query: `emit_spans` over the spans whose places in `span_ids`
    the task was handed."""
    spans = [span_ids[i] for batch in batches for i in batch.column(0).to_pylist()]
    results = emit_spans(spans, parts, diff, owner)
    if results:
        yield pa.RecordBatch.from_pylist(results, schema=RESULT_SCHEMA)


def emit_partition(batches, target: TaskTarget, owner: int = 0):
    """mapInArrow body of a feed with a CDC query: the query's output for the task's spans, in emission
    order."""
    try:
        sink = writer(target)
        beacon = Beacon(sink)
        for batch in batches:
            rows = pl.from_arrow(batch)
            failed = rows.get_column(frame.ERROR).drop_nulls()
            if failed.len():  # the changes' task met what no retry fixes (`pairing.view_partition`)
                raise TerminalError(failed[0])
            sink.add(rows.drop(frame.ERROR))
            beacon.add(batch.num_rows)
        results = [{**result, "batch": target.batch_seq, "owner": owner} for result in sink.finish()]
        beacon.close()
    except Exception as exc:
        results = [_failed(exc, owner)]
    if results:
        yield pa.RecordBatch.from_pylist(results, schema=RESULT_SCHEMA)


@dataclass(frozen=True)
class BatchPart:
    """A later batch of the same spans, written after the first by the same task."""

    changes: StagedSpans | AtSchemaChange
    columns: list[str]
    key: list[str]  # as the part's version names it (a key renamed under column mapping)
    target: TaskTarget


@dataclass(frozen=True)
class TableBatch:
    table: str  # source.table
    # staged changes, a Parquet file per span; or a scan's snapshot; or both at a schema change
    changes: StagedSpans | SnapshotScan | AtSchemaChange
    schema: pa.Schema  # of the rows a task reads
    columns: list[str]  # the table's columns, in order
    key: list[str]
    spans: list[int]  # the spans of the table this node emits
    sql: str | None  # the feed's compiled CDC query, if any
    target: TaskTarget  # where its messages go
    start_hlc: str  # the job's start, for the query's functions
    diff: bool  # before images in the messages
    then: tuple[BatchPart, ...] = ()  # later batches the spans catch up on in the same task (no CDC query)

    @property
    def parts(self) -> list[BatchPart]:
        """Its batches in the order a task writes them: the first, then those it catches up on."""
        return [BatchPart(self.changes, self.columns, self.key, self.target), *self.then]


def tasks(available: int, spans: int) -> int:
    """Partitions for a table's spans: one per span, up to the cores Spark has. A task's fixed cost (its
    worker, its function, a file synced per span) is then paid once per core rather than once per span, while
    every core still works."""
    return max(1, min(spans, available))


def span_tasks(spark, t: TableBatch):
    """The spans' places in `t.spans`, spread over `tasks` partitions."""
    return spark.range(0, len(t.spans), 1, tasks(cores.of(spark), len(t.spans)))


def messages(spark, t: TableBatch, view_name: str, start_hlc: str, diff: bool):
    """A feed with a CDC query: the query over the paired changes of each span, one partition per span,
    in emission order."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = pairing.view_schema(t.schema, t.columns, t.key)
    view = span_tasks(spark, t).mapInArrow(
        partial(
            pairing.view_partition, changes=t.changes, columns=t.columns, key=t.key, schema=schema, span_ids=t.spans
        ),
        from_arrow_schema(schema, prefer_timestamp_ntz=True),
    )
    view.createOrReplaceTempView(view_name)
    return spark.sql(query.spark_sql(t.sql, t.table, t.columns, view_name, start_hlc, diff))


def run_batch(spark, tables: list[TableBatch]) -> list[dict]:
    """Emit every table's messages of one batch (and those a catch-up adds after it); returns one record per
    file written, naming its batch. A task that met an error returns it as its result: the batch then raises
    it, as a TerminalError when no retry fixes it (a scan's task reads the table itself: a file vacuumed, a
    value it cannot read), else as TaskFailed."""
    return outcome(run_shared(spark, [tables]), 0)


def run_shared(spark, owners: list[list[TableBatch]]) -> list[dict]:
    """The tables of several batches (of one feed or of several) as one Spark job; each record names its
    owner, the batch's place in `owners`, and a task's error is its result rather than the job's failure.

    Through the DataFrame API, which Spark Connect serves as a classic session does; but a classic session
    emits the tables without a CDC query through Spark's core API (`_plain`), which makes no query plan: that
    spares the first batch of a run 1.2 s and every later batch some 40 ms (`bench/batch_path.py`)."""
    connect = cores.is_connect(spark)
    owned = [(owner, t) for owner, tables in enumerate(owners) for t in tables]
    return _plain(spark, [(o, t) for o, t in owned if t.sql is None and not connect]) + _frames(
        spark, [(o, t) for o, t in owned if t.sql is not None or connect]
    )


def small(tables: list[TableBatch], rows: int) -> bool:
    """Whether a batch is changes only, of feeds without a CDC query, and holds at most `rows` of them: less
    work than a Spark job's own cost (scheduling, a task per core, their workers, the results' way back)."""
    changes = [p.changes for t in tables for p in t.parts]
    return (
        all(t.sql is None for t in tables)
        and all(isinstance(c, StagedSpans) for c in changes)
        and sum(n for c in changes for n in c.span_rows.values()) <= rows
    )


def run_here(tables: list[TableBatch], views: SharedViews | None = None) -> list[dict]:
    """A batch written by this process rather than by Spark's tasks, through the same task body: every span
    of each table in turn, the messages of a shared staging's span paired once for the node (`views`)."""
    return [record for t in tables for record in emit_spans(t.spans, t.parts, t.diff, views=views)]


def outcome(records: list[dict], owner: int) -> list[dict]:
    """`owner`'s records of a shared job, or the error one of its tasks met."""
    mine = [r for r in records if r["owner"] == owner]
    failed = next((r for r in mine if r.get("error")), None)
    if failed is not None:
        kind = TerminalError if failed["terminal"] else TaskUnavailable if failed.get("unavailable") else TaskFailed
        raise kind(failed["error"])
    return mine


def _plain(spark, tables: list[tuple[int, TableBatch]]) -> list[dict]:
    """Tables without a CDC query on a classic session, as one job of Spark's core API: each task handed its
    spans' numbers."""
    if not tables:
        return []
    context = spark.sparkContext
    jobs = [
        context.parallelize(t.spans, tasks(context.defaultParallelism, len(t.spans))).mapPartitions(
            partial(
                emit_spans,
                parts=t.parts,
                diff=t.diff,
                owner=owner,
            )
        )
        for owner, t in tables
    ]
    return context.union(jobs).collect()


def _frames(spark, tables: list[tuple[int, TableBatch]]) -> list[dict]:
    """Tables as one job of DataFrames: Spark SQL runs a CDC query over each span's paired changes; a table
    without one has its spans emitted by `emit_span_places`."""
    views, outputs = [], []
    try:
        for i, (owner, t) in enumerate(tables):
            if t.sql is None:
                emit = partial(emit_span_places, parts=t.parts, span_ids=t.spans, diff=t.diff, owner=owner)
                outputs.append(span_tasks(spark, t).mapInArrow(emit, RESULT_DDL))
                continue
            # Feeds run in threads sharing one session: a view name of this job's batch alone, dropped after.
            views.append(f"feedctl_changes_{t.target.job_id}_{t.target.batch_seq}_{i}")
            selected = messages(spark, t, views[-1], t.start_hlc, t.diff)
            outputs.append(selected.mapInArrow(partial(emit_partition, target=t.target, owner=owner), RESULT_DDL))
        return reduce(lambda a, b: a.unionByName(b), outputs).toArrow().to_pylist() if outputs else []
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
