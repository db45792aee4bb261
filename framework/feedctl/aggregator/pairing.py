"""Pair each commit's before and after images of a key into one change, in the task that emits it.

Spark hands a task whole spans of change-feed rows sorted by (span, event timestamp, key, version), so a
key's rows of one commit are adjacent: one pass over them, columnar, replaces a sort-based aggregation in
the JVM. A key with both images is an update, only an after image an insert, only a before image a delete;
a primary-key change therefore becomes a delete of the old key and an insert of the new one. Delta enforces
no primary key, so a commit may hold two after (or before) rows of one key: the greatest row wins, not
whichever arrived first, so a re-run picks the same one. A delete and an insert of an identical row in one
commit (a file rewritten without change data: delta-rs does so for an UPDATE that changes nothing) is no
change at all and is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import polars as pl
import pyarrow as pa

from feedctl.compiler.cdc_query import PREV
from feedctl.encoding import frame

CHANGE_TYPE = "_change_type"
VERSION = "_commit_version"
AFTER_TYPES = ("insert", "update_postimage")
_GROUP, _IS_AFTER, _HAS_AFTER, _HAS_BEFORE, _FROM_UPDATE = ("__group", "__is_after", "__has_after",
                                                            "__has_before", "__from_update")
HIDDEN = (frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, frame.MVCC_WALL)


def _orderable(dtype: pl.DataType) -> bool:
    return not dtype.is_nested() and dtype != pl.Object


def pair(rows: pl.DataFrame, columns: list[str], key: list[str]) -> pl.DataFrame:
    """The change view of sorted change-feed rows holding whole (key, version) groups: the row's columns
    (of the after image; a delete keeps only its key), `cdc_prev` (the before image), `__key`, the span, the
    event and commit timestamps and `__op`, one row per change, in the rows' order."""
    starts = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in (*key, VERSION)])
    rows = rows.with_columns(pl.col(CHANGE_TYPE).is_in(AFTER_TYPES).alias(_IS_AFTER),
                             starts.cast(pl.Int64).cum_sum().alias(_GROUP))
    sides = (pl.col(_GROUP) * 2 + pl.col(_IS_AFTER).cast(pl.Int64)).n_unique()
    if rows.select(sides).item() < rows.height:
        # Two images of one side: sort each group by its row so that the last one is the greatest.
        ordered = [c for c in columns if _orderable(rows.schema[c])]
        rows = rows.sort([_GROUP, *ordered], nulls_last=False, maintain_order=True)
    after = pl.col(_IS_AFTER)
    paired = rows.group_by(_GROUP, maintain_order=True).agg(
        *[pl.col(c).first() if c in key else pl.col(c).filter(after).last() for c in columns],
        pl.struct(columns).filter(~after).last().alias(PREV),
        *[pl.col(c).first() for c in HIDDEN],
        after.any().alias(_HAS_AFTER), (~after).any().alias(_HAS_BEFORE),
        pl.col(CHANGE_TYPE).str.starts_with("update_").any().alias(_FROM_UPDATE),
    )
    unchanged = ~pl.col(_FROM_UPDATE) & pl.col(_HAS_AFTER) & pl.col(_HAS_BEFORE) \
        & pl.struct(columns).eq_missing(pl.col(PREV))
    op = pl.when(~pl.col(_HAS_AFTER)).then(pl.lit("delete")) \
        .when(~pl.col(_HAS_BEFORE)).then(pl.lit("insert")).otherwise(pl.lit("update"))
    return paired.filter(~unchanged).select(
        *columns, PREV, pl.struct(key).alias(frame.KEY), *HIDDEN, op.alias(frame.OP))


def messages(view: pl.DataFrame, columns: list[str], diff: bool) -> pl.DataFrame:
    """What a feed without a CDC query emits of the change view: every column after, and before with diff."""
    out = [pl.when(pl.col(frame.OP) != "delete").then(pl.struct(columns)).alias(frame.AFTER)]
    if diff:
        out.append(pl.col(PREV).alias(frame.BEFORE))
    return view.select(*out, frame.KEY, *HIDDEN, frame.OP)


def changes(batches: Iterable[pa.RecordBatch], columns: list[str], key: list[str]) -> Iterator[pl.DataFrame]:
    """The change view of a task's sorted rows, batch by batch. A batch may end inside a (key, version)
    group: its rows wait for the next batch."""
    held: pl.DataFrame | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        rows = pl.from_arrow(batch)
        rows = rows if held is None else pl.concat([held, rows])
        last = rows.tail(1)
        tail = rows.select(pl.all_horizontal([pl.col(c).eq_missing(last[c][0]) for c in (*key, VERSION)])
                           .sum()).item()
        held = rows.tail(tail)
        if rows.height > tail:
            yield pair(rows.head(rows.height - tail), columns, key)
    if held is not None:
        yield pair(held, columns, key)


def view_schema(rows: pa.Schema, columns: list[str], key: list[str]) -> pa.Schema:
    """The Arrow schema of the change view over rows of schema `rows`."""
    fields = [rows.field(c).with_nullable(True) for c in columns]
    return pa.schema([*fields, pa.field(PREV, pa.struct(fields)),
                      pa.field(frame.KEY, pa.struct([rows.field(k) for k in key])),
                      *[rows.field(c) for c in HIDDEN], pa.field(frame.OP, pa.string())])


def view_partition(batches: Iterable[pa.RecordBatch], columns: list[str], key: list[str]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the change view of a task's sorted rows, in the Arrow types Spark handed in."""
    schema = None

    def noting_schema():
        nonlocal schema
        for batch in batches:
            schema = schema or view_schema(batch.schema, columns, key)
            yield batch

    for view in changes(noting_schema(), columns, key):
        yield from view.to_arrow().cast(schema).to_batches()
