"""An initial scan, read by the span tasks themselves.

A scan's rows are inserts at one event timestamp, a key once each: none needs ordering against another, nor
pairing. So the coordinator stages nothing for a scan. Each span's task reads its share of the snapshot's
data files and emits the rows as they stream in, a record batch at a time, so neither the driver nor a task
ever holds the table. A scan's message belongs to the span of the task that read it, which names its files;
its key still picks its Kafka partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from feedctl import frame
from feedctl.frame import CHANGE_TYPE, VERSION
from feedctl.source.delta import DeltaSource
from feedctl.source.spans import Regions
from feedctl.source.stage import VersionTimes, as_inserts, with_times
from feedctl.units import Hlc


@dataclass(frozen=True)
class SnapshotScan:
    """Plain values only: it travels to the executors inside the task closure."""

    table: str
    location: str
    storage_options: dict | None
    version: int
    columns: list[str] | None  # pushdown: columns to read (None: all)
    predicate: str | None  # pushdown: what files are skipped by
    event: tuple[int, int]  # the job's start: every scanned row's event timestamp
    commit_ns: int  # the scanned version's commit time (`mvcc_timestamp`)
    shares: int  # one per span (per region's span, for a regional-by-row table)
    regions: Regions | None = None  # a regional-by-row table: a span reads its region's rows alone
    region_filters: dict | None = None  # per region slot: `predicate` narrowed to the region's files

    def rows_schema(self, table: pa.Schema) -> pa.Schema:
        """The schema of the rows a task reads: `table`'s read columns and the change-feed columns."""
        fields = [f for f in table if self.columns is None or f.name in self.columns]
        return pa.schema(
            [
                *fields,
                pa.field(CHANGE_TYPE, pa.string()),
                pa.field(VERSION, pa.int64()),
                pa.field(frame.TS_WALL, pa.int64()),
                pa.field(frame.TS_LOGICAL, pa.int32()),
                pa.field(frame.MVCC_WALL, pa.int64()),
                pa.field(frame.SPAN, pa.int32()),
            ]
        )

    def rows(self, span: int) -> Iterator[pl.DataFrame]:
        """The span's share of the snapshot as change rows (inserts, a key once each), a record batch at a
        time."""
        source = DeltaSource(self.table, self.location, self.storage_options)
        if self.regions is None:
            reader = as_inserts(
                source.snapshot(self.version, self.columns, span, self.shares, self.predicate), self.version
            )
        else:
            slot = span // self.shares
            share = source.snapshot(
                self.version, self.columns, span % self.shares, self.shares, self.region_filters[slot]
            )
            reader = _of_region(as_inserts(share, self.version), self.regions.column, self.regions.value(slot))
        times = VersionTimes([self.version], [Hlc(*self.event)], [self.commit_ns])
        for batch in reader:
            if batch.num_rows:
                batch = with_times(batch, times)
                batch = batch.append_column(frame.SPAN, pa.repeat(pa.scalar(span, pa.int32()), batch.num_rows))
                yield pl.from_arrow(batch)


def _of_region(reader: pa.RecordBatchReader, column: str, value) -> Iterator[pa.RecordBatch]:
    """The rows of one region: files are only skipped by partition, so other regions' rows are dropped."""
    for batch in reader:
        values = batch.column(column)
        keep = pc.is_null(values) if value is None else pc.equal(values, pa.scalar(value).cast(values.type))
        yield batch.filter(pc.fill_null(keep, False))
