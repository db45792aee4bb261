"""Pair each commit's before and after images of a key into one change, in the task of the key's span.

The task sorts its span's staged rows by (event timestamp, key, version), so a key's rows of one commit
are adjacent, and pairs them in one columnar pass. A key with both images is an update, only an after
image an insert, only a before image a delete; a primary-key change therefore becomes a delete of the old
key and an insert of the new one. Delta enforces no primary key, so a commit may hold two after (or before)
rows of one key: the greatest row wins, not whichever came first, so a re-run picks the same one. A delete
and an insert of an identical row in one commit (a file rewritten without change data: delta-rs does so for
an UPDATE that changes nothing) is no change at all and is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import polars as pl
import pyarrow as pa

from feedctl import frame
from feedctl.errors import TerminalError
from feedctl.frame import AFTER_TYPES, CHANGE_TYPE, PREV, VERSION
from feedctl.source.arrow_types import nullable
from feedctl.source.at_schema_change import AtSchemaChange
from feedctl.source.snapshot import SnapshotScan

_GROUP, _IS_AFTER, _HAS_AFTER, _HAS_BEFORE, _FROM_UPDATE = (
    "__group",
    "__is_after",
    "__has_after",
    "__has_before",
    "__from_update",
)
HIDDEN = frame.TIMES
PIECE_ROWS = 50_000  # rows paired and encoded at a time: memory for messages stays bounded


def pair(rows: pl.DataFrame, columns: list[str], key: list[str], compared: list[str] | None = None) -> pl.DataFrame:
    """The change view of sorted change-feed rows holding whole (key, version) groups: the row's columns
    (of the after image; a delete keeps only its key), `cdc_prev` (the before image), `__key`, the span, the
    event and commit timestamps and `__op`, one row per change, in the rows' order. A row rewritten with
    `compared` (default: every column) as they were is no change."""
    starts = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in (*key, VERSION)])
    rows = rows.with_columns(
        pl.col(CHANGE_TYPE).is_in(AFTER_TYPES).alias(_IS_AFTER), starts.cast(pl.Int64).cum_sum().alias(_GROUP)
    )
    after = pl.col(_IS_AFTER)
    if rows[_GROUP][-1] == rows.height:
        # Every row a change of its own (an initial scan, inserts, deletes): nothing to pair.
        paired = rows.select(
            *[pl.col(c) if c in key else pl.when(after).then(pl.col(c)).alias(c) for c in columns],
            pl.when(~after).then(pl.struct(columns)).alias(PREV),
            *HIDDEN,
            after.alias(_HAS_AFTER),
            (~after).alias(_HAS_BEFORE),
            pl.lit(False).alias(_FROM_UPDATE),
        )
    else:
        sides = (pl.col(_GROUP) * 2 + after.cast(pl.Int64)).n_unique()
        if rows.select(sides).item() < rows.height:
            # Two images of one side: sort each group by its whole row (nested columns too) so that the
            # last one is the greatest, whatever order the rows were read in.
            rows = rows.sort([_GROUP, *columns], nulls_last=False, maintain_order=True)
        paired = rows.group_by(_GROUP, maintain_order=True).agg(
            *[pl.col(c).first() if c in key else pl.col(c).filter(after).last() for c in columns],
            pl.struct(columns).filter(~after).last().alias(PREV),
            *[pl.col(c).first() for c in HIDDEN],
            after.any().alias(_HAS_AFTER),
            (~after).any().alias(_HAS_BEFORE),
            pl.col(CHANGE_TYPE).str.starts_with("update_").any().alias(_FROM_UPDATE),
        )
    same = (
        pl.struct(columns).eq_missing(pl.col(PREV))
        if compared is None
        else pl.struct(compared).eq_missing(pl.struct([pl.col(PREV).struct.field(c) for c in compared]))
    )
    unchanged = ~pl.col(_FROM_UPDATE) & pl.col(_HAS_AFTER) & pl.col(_HAS_BEFORE) & same
    op = (
        pl.when(~pl.col(_HAS_AFTER))
        .then(pl.lit("delete"))
        .when(~pl.col(_HAS_BEFORE))
        .then(pl.lit("insert"))
        .otherwise(pl.lit("update"))
    )
    return paired.filter(~unchanged).select(
        *columns, PREV, pl.struct(key).alias(frame.KEY), *HIDDEN, op.alias(frame.OP)
    )


def messages(view: pl.DataFrame, columns: list[str], diff: bool) -> pl.DataFrame:
    """What a feed without a CDC query emits of the change view: every column after, and before with diff."""
    out = [pl.when(pl.col(frame.OP) != "delete").then(pl.struct(columns)).alias(frame.AFTER)]
    if diff:
        out.append(pl.col(PREV).alias(frame.BEFORE))
    return view.select(*out, frame.KEY, *HIDDEN, frame.OP)


def changes(
    rows: Iterable[pl.DataFrame], columns: list[str], key: list[str], compared: list[str] | None = None
) -> Iterator[pl.DataFrame]:
    """The change view of sorted rows, piece by piece. A piece may end inside a (key, version) group: its
    rows wait for the next piece."""
    held: pl.DataFrame | None = None
    for piece in rows:
        if piece.height == 0:
            continue
        piece = piece if held is None else pl.concat([held, piece])
        last = piece.tail(1)
        tail = piece.select(pl.all_horizontal([pl.col(c).eq_missing(last[c][0]) for c in (*key, VERSION)]).sum()).item()
        held = piece.tail(tail)
        if piece.height > tail:
            yield pair(piece.head(piece.height - tail), columns, key, compared)
    if held is not None:
        yield pair(held, columns, key, compared)


def task_changes(
    staged, span: int, columns: list[str], key: list[str], compared: list[str] | None = None
) -> Iterator[pl.DataFrame]:
    """The change view of one of a task's spans: `staged` is what the batch staged of the table
    (`StagedSpans`), or for an initial scan a `SnapshotScan`, whose tasks read their share of the table
    themselves (inserts, a key once each: every piece pairs alone), or at a schema change both in turn
    (`AtSchemaChange`)."""
    if isinstance(staged, AtSchemaChange):
        if staged.changes is not None:
            for view in task_changes(staged.changes, span, columns, key, staged.compared):
                yield view if staged.backfill is None else view.filter(pl.col(frame.OP) == "delete")
        if staged.backfill is not None:
            yield from task_changes(staged.backfill, span, columns, key)
        return
    if isinstance(staged, SnapshotScan):
        for rows in staged.rows(span):
            yield pair(rows, columns, key)
        return
    rows = staged.read(span, key)
    if rows is not None:  # None: no change of the batch fell in this span
        yield from changes(rows.iter_slices(PIECE_ROWS), columns, key, compared)


def task_spans(tasks: Iterable[pa.RecordBatch]) -> Iterator[int]:
    """The span numbers a task was handed (its partition of `spark.range(spans)`: one or several)."""
    for batch in tasks:
        yield from batch.column(0).to_pylist()


def view_schema(rows: pa.Schema, columns: list[str], key: list[str]) -> pa.Schema:
    """The Arrow schema of the change view over rows of schema `rows`."""
    fields = [nullable(rows.field(c)) for c in columns]
    return pa.schema(
        [
            *fields,
            pa.field(PREV, pa.struct(fields)),
            pa.field(frame.KEY, pa.struct([nullable(rows.field(k)) for k in key])),
            *[nullable(rows.field(c)) for c in HIDDEN],
            pa.field(frame.OP, pa.string()),
            pa.field(frame.ERROR, pa.string()),
        ]
    )


def view_partition(
    tasks: Iterable[pa.RecordBatch],
    changes,
    columns: list[str],
    key: list[str],
    schema: pa.Schema,
    span_ids: list[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body for a feed with a CDC query: the change view of the task's spans, for Spark to query,
    in the view's `schema`. A task is handed places in `span_ids` (default: the spans themselves). What no
    retry fixes (a file of the table gone) is a row of its own, every column null but `frame.ERROR`, which the
    query lets through (`query.spark_sql`) to the task that writes its output: the batch fails with it as
    itself, not as the text of a failed task."""
    try:
        for place in task_spans(tasks):
            span = span_ids[place] if span_ids is not None else place
            for view in task_changes(changes, span, columns, key):
                yield from (
                    view.with_columns(pl.lit(None, pl.String).alias(frame.ERROR)).to_arrow().cast(schema).to_batches()
                )
    except TerminalError as exc:
        yield pa.RecordBatch.from_pylist([{frame.ERROR: str(exc)}], schema=schema)
