"""Stage one batch's changes of one table as Parquet, a file per span, with their event timestamps attached.

Changes stream from delta-rs batch by batch into the writers (memory stays bounded by one record batch);
each span's task then reads its own file. Rows never become Python objects.

An intent names fixed version ranges and every event timestamp in them is already recorded, so staging it
again after a crash stages the same rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from feedctl import frame
from feedctl.frame import CHANGE_TYPE, VERSION
from feedctl.source import spans
from feedctl.source.delta import DeltaSource
from feedctl.source.key_fill import with_new_key_columns
from feedctl.source.shared_staging import SharedStaging
from feedctl.source.staging_area import StagingArea
from feedctl.units import Hlc

if TYPE_CHECKING:  # Spark's workers import this module: not the state store (SQLAlchemy) with it, nor sqlglot
    from feedctl.compiler.read_plan import Pushdown
    from feedctl.state.event_times import Recorded


@dataclass(frozen=True)
class VersionTimes:
    """Event and commit timestamps of each version of a batch, as recorded by the coordinator."""

    versions: list[int]
    event: list[Hlc]
    commit_ns: list[int]


class StagingError(Exception):
    """A task cannot read exactly what the coordinator staged for its span."""


@dataclass(frozen=True)
class StagedSpans:
    """What a batch staged of one table, as its span tasks receive it: the folder, and how many rows each
    span's file holds. A span absent here had no change; a span present must be read whole: a file that is
    missing (an executor that cannot reach the staging folder) or short fails the batch, never reads as "no
    change"."""

    path: str
    span_rows: dict[int, int]
    area: StagingArea
    shared: bool = False  # in the node's shared staging: its folder is named once, for these rows alone

    def read(self, span: int, key: list[str]) -> pl.DataFrame | None:
        """The span's rows sorted by (event timestamp, key, version), so a key's rows of one commit are adjacent
        and changes come in emission order; None when no change of the batch fell in the span."""
        expected = self.span_rows.get(span, 0)
        if not expected:
            return None
        path = span_file(self.path, span)
        try:
            if self.area.local:  # read by Arrow itself, not through a Python file
                rows = pl.read_parquet(path)
            else:
                with self.area.filesystem().open(path, "rb") as handle:
                    rows = pl.read_parquet(handle)
        except OSError as exc:
            raise StagingError(
                f"span {span}: its {expected} staged changes cannot be read at {path} "
                f"({type(exc).__name__}: {exc}); is the staging folder reachable from every "
                "executor?"
            ) from None
        if rows.height != expected:
            raise StagingError(f"span {span}: {rows.height} staged changes at {path}, {expected} expected")
        return rows.sort([frame.TS_WALL, frame.TS_LOGICAL, *key, VERSION], maintain_order=True)


@dataclass
class Staged:
    path: str | None  # folder of Parquet files; None when the batch has no change for the table
    rows: int
    bytes: int
    schema: pa.Schema | None = None  # of the files
    span_rows: dict[int, int] = field(default_factory=dict)  # rows staged for each span that has any
    area: StagingArea | None = None
    shared: bool = False  # in the node's shared staging (`shared_staging`): it removes the files, not the batch
    taken: bool = False  # read by another feed's batch
    fresh: float = 1.0  # the share of its rows read from Delta; the rest came from the node's kept versions

    @property
    def rows_read(self) -> int:
        """Its change rows read from Delta for it (none when taken from another feed's staging)."""
        return 0 if self.taken else round(self.rows * self.fresh)

    def spans(self) -> StagedSpans:
        return StagedSpans(self.path, self.span_rows, self.area, self.shared)


def _arrays(times: VersionTimes) -> tuple[pa.Array, ...]:
    return (
        pa.array(times.versions, pa.int64()),
        pa.array([t.wall for t in times.event], pa.int64()),
        pa.array([t.logical for t in times.event], pa.int32()),
        pa.array(times.commit_ns, pa.int64()),
    )


def with_times(batch: pa.RecordBatch, times: VersionTimes) -> pa.RecordBatch:
    """The change rows with each version's recorded event timestamp and commit time as columns."""
    versions, event_walls, event_logicals, commit_ns = _arrays(times)
    index = pc.index_in(batch.column(VERSION), value_set=versions)
    if index.null_count:
        missing = pc.filter(batch.column(VERSION), pc.is_null(index))[0].as_py()
        raise ValueError(f"version {missing} has no recorded event timestamp")
    walls = pc.take(event_walls, index)
    logicals = pc.take(event_logicals, index)
    commits = pc.take(commit_ns, index)
    columns = [c for c in batch.schema.names if c != frame.COMMIT_TIMESTAMP]
    out = batch.select(columns)
    for name, values in ((frame.TS_WALL, walls), (frame.TS_LOGICAL, logicals), (frame.MVCC_WALL, commits)):
        out = out.append_column(name, values)
    return out


def span_file(folder: str | Path, span: int) -> str:
    return f"{folder}/span-{span:05d}.parquet"


def stage_changes(
    reader: pa.RecordBatchReader,
    times: VersionTimes,
    folder: str | Path,
    span_of: Callable[[pa.RecordBatch], np.ndarray],
    area: StagingArea | None = None,
    keep: list[int] | None = None,
) -> Staged:
    """Write the change batches of `reader` under `folder` of `area` (replaced if it exists), one file per
    span (`span_of` gives each row's): the task of a span reads its file alone. With `keep`, only those
    spans' rows (the spans this node emits)."""
    folder = str(folder)
    area = area or StagingArea(folder)
    area.remove(folder)
    fs = None if area.local else area.filesystem()
    if fs is None:
        Path(folder).mkdir(parents=True)
    writers: dict[int, pq.ParquetWriter] = {}
    span_rows: dict[int, int] = {}
    rows, schema = 0, None
    with ExitStack() as closing:  # every writer closed, even if one of them fails to
        for batch in reader:
            if batch.num_rows == 0:
                continue
            batch = with_times(batch, times)
            spans = span_of(batch)
            if keep is not None:
                kept = np.isin(spans, keep)
                batch, spans = batch.filter(pa.array(kept)), spans[kept]
                if batch.num_rows == 0:
                    continue
            batch = batch.append_column(frame.SPAN, pa.array(spans, pa.int32()))
            schema = batch.schema
            order = np.argsort(spans, kind="stable")
            ordered = batch.take(order)
            present, starts, counts = np.unique(spans[order], return_index=True, return_counts=True)
            for span, start, count in zip(present.tolist(), starts.tolist(), counts.tolist()):
                if span not in writers:
                    # Read once, right away: dictionaries and statistics would cost half the write.
                    path = span_file(folder, span)  # written by Arrow itself on local disk
                    target = path if fs is None else closing.enter_context(fs.open(path, "wb"))
                    writers[span] = closing.enter_context(
                        pq.ParquetWriter(
                            target, batch.schema, compression="lz4", use_dictionary=False, write_statistics=False
                        )
                    )
                writers[span].write_batch(ordered.slice(start, count))
                span_rows[span] = span_rows.get(span, 0) + count
            rows += batch.num_rows
    if rows == 0:
        area.remove(folder)
        return Staged(None, 0, 0)
    size = area.size([span_file(folder, span) for span in span_rows])
    return Staged(folder, rows, size, schema, span_rows, area)


def as_inserts(reader: pa.RecordBatchReader, version: int) -> pa.RecordBatchReader:
    """A snapshot read as the change feed of an initial scan: every row an insert at `version`."""

    def batches():
        for batch in reader:
            n = batch.num_rows
            yield batch.append_column(CHANGE_TYPE, pa.repeat(pa.scalar("insert"), n)).append_column(
                VERSION, pa.repeat(pa.scalar(version, pa.int64()), n)
            )

    schema = reader.schema.append(pa.field(CHANGE_TYPE, pa.string())).append(pa.field(VERSION, pa.int64()))
    return pa.RecordBatchReader.from_batches(schema, batches())


@dataclass(frozen=True)
class Layout:
    """How one batch places a table's rows in spans: the key the job emits it under, the regions that have
    spans (a regional-by-row table), and, at the version a key change added the new key's columns, the old
    key and those columns (`source/key_fill.py`)."""

    key: list[str]
    regions: spans.Regions | None = None
    fills: dict[int, tuple[list[str], tuple[str, ...]]] = field(default_factory=dict)  # version -> (old, added)


class Stager:
    """Stages a node's share of a job's batches under `<area>/<job>/<node>/<batch>/`, in a folder of its own
    per staging: a second process (after a lost span) never reads half of ours. A batch's folder goes when
    the node's spans have emitted it. With `shared`, changes that other feeds of the node stage the same way
    are read once, under `<area>/shared/<node>/`."""

    def __init__(
        self,
        area: StagingArea,
        job_id: int,
        sources: dict[str, DeltaSource],
        spans: dict[str, int],
        pushdown: dict[str, Pushdown],
        node: str = "node",
        shared: SharedStaging | None = None,
    ):
        self.area, self.job_id, self.sources, self.node = area, job_id, sources, node
        self.spans, self.pushdown = spans, pushdown
        self.shared = shared

    def folder(self, batch_seq: int) -> str:
        return self.area.join(str(self.job_id), self.node, str(batch_seq), uuid.uuid4().hex[:12])

    def stage(
        self,
        table: str,
        after: int,
        up_to: int,
        recorded: list[Recorded],
        batch_seq: int,
        layout: Layout,
        source: DeltaSource | None = None,
        keep: list[int] | None = None,
    ) -> Staged:
        """Stage one table's changes in (after, up_to] for batch `batch_seq`, stamped with their recorded event
        timestamps, placed in spans as `layout` says (only spans `keep`, if given). The range and the spans fix
        what is staged; the same staged by another feed of the node is taken from it."""
        source = source or self.sources[table]
        if self.shared is None:
            return self._stage(table, after, up_to, recorded, f"{self.folder(batch_seq)}/{table}", layout, source, keep)
        pushdown = self.pushdown.get(table)
        key = (  # everything that fixes what is staged
            self.area.location,
            source.location,
            after,
            up_to,
            repr(pushdown),
            tuple((e.version, e.event_ts, e.commit_ns) for e in recorded),
            repr(layout),
            self.spans[table],
            tuple(keep or ()),
        )
        return self.shared.stage(
            key,
            (self.job_id, batch_seq),
            lambda: replace(
                self._stage(
                    table,
                    after,
                    up_to,
                    recorded,
                    f"{self.shared.folder(self.area, self.node)}/{uuid.uuid4().hex[:12]}",
                    layout,
                    source,
                    keep,
                ),
                shared=True,
            ),
        )

    def _stage(
        self,
        table: str,
        after: int,
        up_to: int,
        recorded: list[Recorded],
        folder: str,
        layout: Layout,
        source: DeltaSource,
        keep: list[int] | None,
    ) -> Staged:
        times = VersionTimes(
            [e.version for e in recorded], [e.event_ts for e in recorded], [e.commit_ns for e in recorded]
        )
        pushdown = self.pushdown.get(table)
        columns, condition = (pushdown.columns, pushdown.change_filter) if pushdown else (None, None)
        regions, per_region = layout.regions, self.spans[table]
        key = source.names_at(up_to, layout.key)  # a key renamed since, under its name then
        fill = layout.fills.get(up_to) if after == up_to - 1 else None
        if regions is not None and keep is not None and fill is None:  # before images have no region there
            from feedctl.compiler.pushdown import with_regions

            condition = with_regions(condition, regions.column, regions.of(keep, per_region))
        if self.shared is not None:  # versions another feed's range read a while ago are taken from memory
            rows = sum(e.rows for e in recorded)
            reader, tally = self.shared.versions.changes(source, after, up_to, columns, condition, key, rows)
        else:
            reader, tally = source.changes(after, up_to, columns, condition, key), None
        if fill is not None:
            old_key, added = fill
            reader = with_new_key_columns(
                reader, source.changes(after, up_to, [*old_key, *added], condition), old_key, added
            )
        try:
            staged = stage_changes(
                reader,
                times,
                folder,
                partial(spans.of_batch, key=key, spans=per_region, regions=regions),
                self.area,
                keep,
            )
        except BaseException:
            self.area.remove(folder)
            raise
        if tally is not None and tally.rows:
            staged = replace(staged, fresh=tally.read / tally.rows)
        return staged

    def drop(self, staged: Staged) -> None:
        """Files staged for a batch that came out otherwise (a shared staging goes with its batch's `clean`)."""
        if staged.path is not None and not staged.shared:
            self.area.remove(staged.path)

    def clean(self, batch_seq: int) -> None:
        self.area.remove(self.area.join(str(self.job_id), self.node, str(batch_seq)))
        if self.shared is not None:
            self.shared.release((self.job_id, batch_seq))
