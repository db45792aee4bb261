"""Each version's change rows, kept a while in a node's memory for its other feeds. Feeds over one table rarely
cut the same version ranges (their coordinators step apart), so a staging shared only for the same range
(`shared_staging`) leaves most of them reading again what another feed read a moment before. A range's
changes are the concatenation of its versions' (the reader goes version by version, `table_reader.changes`),
so a range is put together from the versions kept and those read now, in one read per run of missing
versions.

What fixes a version's rows is its key: the table and how its changes are read, the columns and condition
pushed down, the key rewrites are matched by, and how the range's newest version lays out its files (a batch's
versions share one layout; a run read apart must have the same, else the range is read whole, as without the
cache). Only small ranges are kept: a catch-up's batch streams from Delta as before, never held whole.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from feedctl.source.table_reader import VERSION

MAX_BYTES = 256 * 1024 * 1024  # the node's versions kept, at most; the least recently used go first
MAX_ROWS = 100_000  # a range said larger by its commits' metrics, or a run found larger as read, is not kept


@dataclass
class Tally:
    """What a range's reader gave, counted as it is read: rows in all, and those read from Delta."""

    rows: int = 0
    read: int = 0


class VersionCache:
    def __init__(self, max_bytes: int = MAX_BYTES, max_rows: int = MAX_ROWS):
        self.max_bytes, self.max_rows = max_bytes, max_rows
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, pa.Table] = OrderedDict()
        self._bytes = 0

    def changes(
        self,
        source,
        after: int,
        up_to: int,
        columns: list[str] | None,
        condition: str | None,
        key: list[str] | None,
        rows: int,
    ) -> tuple[pa.RecordBatchReader, Tally | None]:
        """The changes of versions (after, up_to] of `source` (a `DeltaSource`), as `source.changes` gives
        them, and their tally, filled as they are read (None: read as without the cache). `rows`: what the
        range's commits say they hold; a run read now that proves larger than `max_rows` streams on, kept
        by nobody."""
        if rows > self.max_rows or up_to <= after:
            return source.changes(after, up_to, columns, condition, key), None
        layout = repr(source.layout(up_to))
        base = (
            source.location,
            str(source.change_source),
            layout,
            tuple(columns) if columns is not None else None,
            condition,
            tuple(key) if key is not None else None,
        )
        versions = range(after + 1, up_to + 1)
        with self._lock:
            found = {v: self._kept.get((*base, v)) for v in versions}
            for v, table in found.items():
                if table is not None:
                    self._kept.move_to_end((*base, v))
        runs = {}  # the first version of each run of missing ones -> (its last, its reader, opened now)
        for first, last in _runs([v for v in versions if found[v] is None]):
            if last != up_to and repr(source.layout(last)) != layout:  # cannot happen in a batch; never assumed
                return source.changes(after, up_to, columns, condition, key), None
            runs[first] = (last, source.changes(first - 1, last, columns, condition, key))
        schema = next(iter(runs.values()))[1].schema if runs else found[after + 1].schema
        tally = Tally()

        def batches():
            v = after + 1
            while v <= up_to:
                if found[v] is not None:
                    for batch in found[v].to_batches():
                        tally.rows += batch.num_rows
                        yield batch
                    v += 1
                    continue
                last, reader = runs[v]
                kept: list[pa.RecordBatch] | None = []
                for batch in reader:
                    tally.rows += batch.num_rows
                    tally.read += batch.num_rows
                    if kept is not None:
                        kept.append(batch)
                        if tally.read > self.max_rows:
                            kept = None  # too large to keep: streamed on
                    yield batch
                if kept is not None:
                    self._keep_run(base, v, last, pa.Table.from_batches(kept, schema=reader.schema))
                v = last + 1

        return pa.RecordBatchReader.from_batches(schema, batches()), tally

    def _keep_run(self, base: tuple, first: int, last: int, table: pa.Table) -> None:
        """Each version of a run read, kept apart."""
        column = table.column(VERSION)
        for v in range(first, last + 1):
            self._keep((*base, v), table.filter(pc.equal(column, v)))

    def _keep(self, key: Hashable, table: pa.Table) -> None:
        size = table.nbytes
        if size > self.max_bytes // 4:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            self._bytes += size - (old.nbytes if old is not None else 0)
            self._kept[key] = table
            while self._bytes > self.max_bytes:
                _, gone = self._kept.popitem(last=False)
                self._bytes -= gone.nbytes


def _runs(versions: list[int]) -> list[tuple[int, int]]:
    """Consecutive versions as (first, last) runs."""
    out: list[tuple[int, int]] = []
    for v in versions:
        if out and out[-1][1] == v - 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out
