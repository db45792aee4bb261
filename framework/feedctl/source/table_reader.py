"""The rows of a Delta table, read per the protocol from the files its log names: a version's snapshot (or a
share of it), and the changes of a range of versions.

A version's changes are its change data files when it has them (what `UPDATE`, `DELETE` and `MERGE` write
with the change data feed on) and the table reads them (`change_source`); otherwise the rows of the files it
added are inserts and those of the files it removed are deletes, and a file it gave a new deletion vector
deleted the rows the new vector adds (and restored those it drops). Actions without `dataChange`
(`OPTIMIZE`) change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from feedctl.frame import CHANGE_TYPE, COMMIT_TIMESTAMP, VERSION
from feedctl.source import data_file, reader_filter, rewrites
from feedctl.source.change_source import ChangeSource, VersionRead, change_data_on, version_read
from feedctl.source.data_file import DataFileError, Layout
from feedctl.source.deletion_vector import DeletionVectorError, deleted_rows
from feedctl.source.delta_log import Commit, DataFile, DeltaLog
from feedctl.source.table_store import TableStore

CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms")),
)


class TableReader:
    def __init__(self, store: TableStore):
        self.store = store
        self.log = DeltaLog(store)

    def files(self, version: int, layout: Layout, condition=None) -> list[DataFile]:
        """The data files of `version` that may hold a row `condition` (a `reader_filter` tree) keeps."""
        return [f for f in self.log.files(version) if self._may_match(f, layout, condition)]

    def rows(
        self, version: int, layout: Layout, columns: list[str] | None, share: int = 0, shares: int = 1, condition=None
    ) -> Iterator[pa.RecordBatch]:
        """The rows of `version`, or share `share` of `shares` of them: its files dealt out in turn, or
        their row groups when there are fewer files than shares. Every row is in one share, and in the same
        one each time."""
        files = self.files(version, layout, condition)
        units: list[tuple[DataFile, list[int] | None]] = [(f, None) for f in files]
        if 1 < shares and len(files) < shares:
            units = [(f, [g]) for f in files for g in range(self._row_groups(f))]
        where = reader_filter.expression(condition, _projected(layout, columns))
        for f, groups in units[share::shares]:
            yield from self._filtered(self._read(f, layout, columns, row_groups=groups), where)

    def changes(
        self,
        versions: range,
        layout: Layout,
        columns: list[str] | None,
        condition=None,
        enabled: bool = False,
        source: ChangeSource = ChangeSource.AUTO,
        key: list[str] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The change rows of `versions`, read with `layout` (every version of a range shares one schema):
        `columns`, then `_change_type`, `_commit_version` and `_commit_timestamp`. `enabled`: whether the
        change data feed is on at the version before the first; `source` says how each version is read.
        Given the `key`, the rows a version read from the log only carried over are left out (`rewrites`)."""
        where = reader_filter.expression(condition, _projected(layout, columns))
        for version in versions:
            commit = self.log.commit(version)
            if commit.configuration is not None:
                enabled = change_data_on(commit.configuration)
            how = version_read(source, version, enabled, bool(commit.cdc))
            ms = int(commit.info.get("inCommitTimestamp") or commit.info.get("timestamp") or 0)
            pieces = _at_version(version, self._commit_changes(commit, layout, columns, condition, how))
            if key is not None and how == VersionRead.FILE_ACTIONS and commit.rewrites:
                pieces = rewrites.without_unchanged(pieces, key)
            for kind, batch in pieces:
                rows = batch.num_rows
                if not rows:
                    continue
                names = columns if columns is not None else layout.schema.names
                stamped = [batch.column(i) for i in range(len(names))]
                stamped += [
                    batch.column(CHANGE_TYPE) if kind is None else pa.repeat(pa.scalar(kind), rows),
                    pa.repeat(pa.scalar(version, pa.int64()), rows),
                    pa.repeat(pa.scalar(ms, pa.timestamp("ms")), rows),
                ]
                out = pa.RecordBatch.from_arrays(stamped, names=[*names, *(f.name for f in CHANGE_FIELDS)])
                yield from self._filtered([out], where)

    def _commit_changes(self, commit: Commit, layout: Layout, columns, condition, how: VersionRead):
        """(change type, rows) of one commit; the type None: the rows carry their own (change data files)."""
        if how == VersionRead.CHANGE_FILES:
            for f in commit.cdc:
                if self._may_match(f, layout, condition):
                    for batch in self._read(f, layout, columns, extra=[CHANGE_TYPE], with_deletes=False):
                        yield None, batch
            return
        removed = {f.path: f for f in commit.removes if f.data_change}
        added = {f.path: f for f in commit.adds if f.data_change}
        for path, f in removed.items():
            if path in added:
                continue
            f = self._with_partitions(f, commit.version, layout)
            if self._may_match(f, layout, condition):
                for batch in self._read(f, layout, columns):
                    yield "delete", batch
        for path, f in added.items():
            if not self._may_match(f, layout, condition):
                continue
            before = removed.get(path)
            if before is None:
                for batch in self._read(f, layout, columns):
                    yield "insert", batch
                continue
            # the same file with a new deletion vector: the rows it deletes now, and those it no longer does
            gone_before, gone_now = self._deleted(before), self._deleted(f)
            for kind, only in (
                ("delete", np.setdiff1d(gone_now, gone_before)),
                ("insert", np.setdiff1d(gone_before, gone_now)),
            ):
                if len(only):
                    for batch in self._read(f, layout, columns, only=only):
                        yield kind, batch

    def _with_partitions(self, f: DataFile, version: int, layout: Layout) -> DataFile:
        """A removed file with its partition values: writers may leave them out of `remove` actions."""
        if f.partition_values or not layout.partition_columns:
            return f
        for before in self.log.files(version - 1):
            if before.key == f.key:
                return before
        return f

    def _may_match(self, f: DataFile, layout: Layout, condition) -> bool:
        if condition is None:
            return True
        physical = {name: node.physical for name, node in layout.root.children.items()}
        return reader_filter.may_match(
            condition, layout.schema, physical, layout.partition_columns, f.partition_values, f.stats
        )

    def _deleted(self, f: DataFile) -> np.ndarray:
        if f.deletion_vector is None:
            return np.empty(0, dtype=np.int64)
        try:
            return deleted_rows(f.deletion_vector, self.store.root, self.store.read_range)
        except DeletionVectorError as exc:
            raise DeletionVectorError(f"the deletion vector of {f.path}: {exc}") from None

    def _row_groups(self, f: DataFile) -> int:
        with self.store.open_named(f.path) as handle:
            return pq.ParquetFile(handle).num_row_groups

    def _read(
        self, f: DataFile, layout: Layout, columns, row_groups=None, extra=(), only=None, with_deletes=True
    ) -> Iterator[pa.RecordBatch]:
        deleted = self._deleted(f) if with_deletes and only is None else None
        with self.store.open_named(f.path) as handle:
            yield from data_file.read(
                handle, layout, f.partition_values, columns, deleted, row_groups, list(extra), only
            )

    @staticmethod
    def _filtered(batches, where) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield batch if where is None else batch.filter(where)


def _at_version(version: int, pieces):
    """`pieces` of a version's changes; what its files hold that cannot be read said at the version."""
    try:
        yield from pieces
    except (DataFileError, DeletionVectorError) as exc:
        raise type(exc)(f"version {version}: {exc}") from None


def _projected(layout: Layout, columns: list[str] | None) -> pa.Schema:
    """The schema of the rows read: a condition on a column not read only skips files."""
    return layout.schema if columns is None else pa.schema([layout.schema.field(c) for c in columns])
