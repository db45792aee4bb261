"""Delta tables through delta-rs (`deltalake`): versions, commit times, the change data feed and snapshots.

Every read returns Arrow with Spark-friendly types: delta-rs hands out `string_view`/`binary_view` and a
`uint64` commit version, which Spark's Arrow conversion rejects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from feedctl.diagnostics import first_line
from feedctl.frame import CDF_COLUMNS
from feedctl.source import schema_change
from feedctl.source.schema_change import SchemaChange


# What delta-rs takes from the environment when a table's storage options do not say (object_store's names):
# resolved in the driver for the tasks that read a table themselves, whose hosts may not have it.
_STORE_ENV = {
    "s3": ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
           "AWS_DEFAULT_REGION", "AWS_ALLOW_HTTP"),
    "gs": ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
    "az": ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN",
           "AZURE_STORAGE_CLIENT_ID", "AZURE_STORAGE_CLIENT_SECRET", "AZURE_STORAGE_TENANT_ID"),
}
_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "az": "az", "azure": "az", "abfs": "az", "abfss": "az"}


class SourceError(Exception):
    """A table cannot give what the feed needs; the message names the table and the versions."""


@dataclass(frozen=True)
class Commit:
    version: int
    commit_ns: int  # the commit's own timestamp (in-commit timestamp when the table has them)
    operation: str
    rows: int  # estimate of change rows, from the commit's metrics
    rewrote: bool = False  # the commit rewrote existing rows (an overwrite, or files removed)


def _spark_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_uint32(t):
        return pa.int64()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(_spark_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_spark_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_spark_type(t.key_type), _spark_type(t.item_type))
    return t


def spark_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_spark_type(f.type)) for f in schema])


def normalize(batch: pa.RecordBatch) -> pa.RecordBatch:
    target = spark_schema(batch.schema)
    return batch if target == batch.schema else batch.cast(target)


class SnapshotFiles(NamedTuple):
    files: int  # the data files a read opens...
    bytes: int
    all_files: int  # ...of the snapshot's
    all_bytes: int
    rows: int  # of the files read, by the Delta log's statistics (files written without them count none)


class DeltaSource:
    """One table, named for messages (`movr.rides`) and opened at `location`."""

    def __init__(self, name: str, location: str, storage_options: dict | None = None):
        self.name = name
        self.location = location
        self.storage_options = storage_options or None
        self._table = None
        self._schemas: dict[int, pa.Schema] = {}  # a version's schema never changes
        self._one_schema: tuple[int, int] | None = None  # versions from..to known to share one schema
        self._changes: dict[int, SchemaChange] = {}

    def table(self, version: int | None = None):
        from deltalake import DeltaTable

        try:
            if version is not None:
                return DeltaTable(self.location, version=version, storage_options=self.storage_options)
            if self._table is None:
                self._table = DeltaTable(self.location, storage_options=self.storage_options)
            else:
                self._table.update_incremental()
            return self._table
        except Exception as exc:
            if not _is_missing(exc):
                raise  # a storage hiccup: the caller retries
            at = f" at version {version}" if version is not None else ""
            raise SourceError(f"table {self.name}{at} cannot be opened at {self.location}: "
                              f"{first_line(exc)}") from None

    def task_options(self) -> dict | None:
        """The table's storage options as a task on another host needs them: what delta-rs would take from
        this process's environment, then the table's own options over it."""
        scheme = _SCHEMES.get(self.location.split("://", 1)[0].lower() if "://" in self.location else "")
        found = {name: os.environ[name] for name in _STORE_ENV.get(scheme, ()) if os.environ.get(name)}
        return {**found, **(self.storage_options or {})} or None

    def latest_version(self) -> int:
        return self.table().version()

    def check_readable(self, from_version: int) -> None:
        """Refuse what delta-rs cannot read correctly, naming table and versions."""
        table = self.table()
        config = table.metadata().configuration
        if config.get("delta.columnMapping.mode", "none") != "none":
            raise SourceError(f"table {self.name} uses column mapping ({config['delta.columnMapping.mode']}); "
                              "delta-rs cannot read the change data feed of such tables")
        for version, conf in ((from_version, None), (table.version(), config)):
            conf = conf if conf is not None else self.table(version).metadata().configuration
            if conf.get("delta.enableChangeDataFeed", "false").lower() != "true":
                raise SourceError(f"table {self.name} does not have its change data feed enabled at version "
                                  f"{version}; set delta.enableChangeDataFeed=true (changes before that cannot "
                                  "be read)")

    def commits(self, after_version: int, up_to: int) -> list[Commit]:
        """Commits after `after_version` up to `up_to`, oldest first."""
        if up_to <= after_version:
            return []
        table = self.table()
        # history() counts back from the newest version, which may be far past `up_to`.
        history = table.history(limit=max(table.version(), up_to) - after_version + 1)
        found = {}
        for entry in history:
            version = entry.get("version")
            if version is None or not after_version < version <= up_to:
                continue
            millis = entry.get("inCommitTimestamp") or entry.get("timestamp") or 0
            found[version] = Commit(version, int(millis) * 1_000_000, str(entry.get("operation", "")),
                                    _estimate_rows(entry), _rewrote(entry))
        missing = [v for v in range(after_version + 1, up_to + 1) if v not in found]
        if missing:
            raise SourceError(f"table {self.name}: versions {missing[0]}..{missing[-1]} are no longer in its log "
                              "(cleaned up or vacuumed); the feed cannot continue from version "
                              f"{after_version}. Start a new feed with a later cursor.")
        return [found[v] for v in sorted(found)]

    def changes(self, after_version: int, to_version: int, columns: list[str] | None = None,
                predicate: str | None = None) -> pa.RecordBatchReader:
        """The change data feed of versions (after_version, to_version], as a stream of normalized batches;
        with `predicate` (pushdown), only the rows it keeps, and the files it rules out are not read."""
        # delta-rs parses each name as SQL, folding unquoted ones to lower case: quote them
        cols = None if columns is None else [f"`{c.replace('`', '``')}`"
                                             for c in dict.fromkeys([*columns, *CDF_COLUMNS])]
        reading = f"table {self.name}: cannot read changes of versions {after_version + 1}..{to_version}"

        table = self.table()
        if table.version() > to_version and not self._same_schema(to_version, table.version()):
            table = self.table(to_version)  # a newer schema would drop the columns a later version dropped

        def load(condition):
            return table.load_cdf(starting_version=after_version + 1, ending_version=to_version,
                                  columns=cols, predicate=condition)

        try:
            reader = pa.RecordBatchReader.from_stream(_unless_refused(load, predicate))
        except Exception as exc:
            if not (_is_missing(exc) or _is_gone(exc) or "change data" in str(exc).lower()):
                raise  # a storage hiccup: the caller retries
            raise SourceError(f"{reading}: {first_line(exc)}") from None
        return _normalized(reader, reading)

    def snapshot(self, version: int, columns: list[str] | None = None, share: int = 0, shares: int = 1,
                 predicate: str | None = None) -> pa.RecordBatchReader:
        """The table's rows at `version`, streamed; or share `share` of `shares` of them: its data files
        dealt out in turn, or their row groups when there are fewer files than shares. Every row is in one
        share, and in the same one each time, so a scan's task reads the same rows when run again. With
        `predicate` (pushdown), files it rules out are not read (their rows are left for the query to drop)."""
        dataset = self._dataset(version, predicate)
        schema = dataset.schema if columns is None else pa.schema([dataset.schema.field(c) for c in columns])

        def batches():  # files are opened here, so a file that is gone is reported as such
            fragments = sorted(dataset.get_fragments(), key=lambda f: f.path)
            if 1 < shares and len(fragments) < shares:
                fragments = [group for f in fragments for group in f.split_by_row_group()]
            for fragment in fragments[share::shares]:
                yield from fragment.to_batches(schema=dataset.schema, columns=schema.names)

        return _normalized(pa.RecordBatchReader.from_batches(schema, batches()),
                           f"table {self.name}: cannot read version {version}")

    def snapshot_files(self, version: int, predicate: str | None = None) -> SnapshotFiles:
        """What a snapshot read with `predicate` opens, and the whole snapshot."""
        actions = self.table(version).get_add_actions()
        paths = actions["path"].to_pylist()
        sizes = dict(zip(paths, actions["size_bytes"].to_pylist()))
        rows = dict(zip(paths, actions["num_records"].to_pylist()))
        read = [f.path for f in self._dataset(version, predicate).get_fragments()]
        return SnapshotFiles(len(read), sum(sizes.get(p, 0) for p in read), len(sizes), sum(sizes.values()),
                             sum(rows.get(p) or 0 for p in read))

    def _dataset(self, version: int, predicate: str | None):
        table = self.table(version)
        return _unless_refused(lambda condition: table.to_pyarrow_dataset(file_pruning_predicate=condition),
                               predicate)

    def read_estimate(self, columns: list[str] | None = None, predicate: str | None = None) -> tuple[float, int]:
        """What a feed reading `columns` of the files `predicate` leaves reads of a change: the share of the
        table's rows (by the current snapshot's bytes), and the Arrow bytes of an average row (from a sample).
        Sizes batches by what is read."""
        files = self.snapshot_files(self.latest_version(), predicate)
        size, total = files.bytes, files.all_bytes
        dataset = self._dataset(None, predicate)
        present = None if columns is None else [c for c in columns if c in dataset.schema.names]  # some dropped since
        sample = dataset.head(1000, columns=present)
        row_bytes = max(1, sample.nbytes // sample.num_rows) if sample.num_rows else 256
        return (size / total if total else 1.0), row_bytes

    def schema(self, version: int | None = None) -> pa.Schema:
        if version is None or version not in self._schemas:
            loaded = self._table is not None and self._table.version() == version  # the newest, already open
            schema = spark_schema(pa.schema((self._table if loaded else self.table(version)).schema().to_arrow()))
            if version is None:
                return schema
            self._schemas[version] = schema
        return self._schemas[version]

    def schema_changes(self, after_version: int, up_to: int) -> list[int]:
        """The versions in (after_version, up_to] whose schema differs from the version before: a batch
        holds versions of one schema. Found by bisection, so a range without a change costs two schemas."""
        changes, low = [], max(after_version, 0)
        while low < up_to and self.schema(low) != self.schema(up_to):
            lo, hi = low, up_to  # schema(lo) == schema(low) != schema(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if self.schema(mid) == self.schema(low) else (lo, mid)
            changes.append(hi)
            low = hi
        return changes

    def _same_schema(self, version: int, newest: int) -> bool:
        """Whether `version` has the schema of `newest`; in steady state it costs nothing, as the versions
        known to share a schema only grow."""
        known = self._one_schema
        if known is None or version < known[0] or self.schema(known[1]) != self.schema(newest):
            if self.schema_changes(version, newest):
                return False
            known = (version, newest)
        self._one_schema = (known[0], newest)
        return True

    def schema_change(self, version: int) -> SchemaChange:
        """How `version` changed the schema of the version before it. A table that turned column mapping on
        (how columns are renamed, or dropped in place) is refused, as at a job's start."""
        if version not in self._changes:  # a version's change never changes
            mode = self.table(version).metadata().configuration.get("delta.columnMapping.mode", "none")
            if mode != "none":
                raise SourceError(f"table {self.name} uses column mapping ({mode}) from version {version}, which "
                                  "changed its schema; delta-rs cannot read the change data feed of such tables")
            self._changes[version] = schema_change.between(self.name, version, self.schema(version - 1),
                                                           self.schema(version),
                                                           self.commits(version - 1, version)[0].rewrote)
        return self._changes[version]

    def values(self, column: str, version: int, after_version: int | None = None) -> set:
        """The distinct values of `column` in the changes of versions (after_version, version], or without
        `after_version`, in the snapshot at `version`: one column read."""
        reader = self.snapshot(version, [column]) if after_version is None else \
            self.changes(after_version, version, [column])
        found = set()
        for batch in reader:
            found.update(pc.unique(batch.column(column)).to_pylist())
        return found


def _normalized(reader: pa.RecordBatchReader, reading: str | None = None) -> pa.RecordBatchReader:
    """Normalized batches. delta-rs reads data files lazily, so a file that is gone (vacuumed) shows up
    only while streaming: that becomes a SourceError saying what was being read (`reading`)."""
    schema = spark_schema(reader.schema)

    def batches():
        try:
            for batch in reader:
                yield normalize(batch)
        except Exception as exc:
            if reading is None or not _is_gone(exc):
                raise
            raise SourceError(f"{reading}: a data file is gone (vacuumed?): {first_line(exc)}") from None

    return pa.RecordBatchReader.from_batches(schema, batches())


# How delta-rs (DataFusion) says it cannot evaluate a pushed-down condition against the table.
_REFUSED = ("Schema error", "Cast error", "Error during planning", "Cannot use predicate", "Optimizer rule",
            "SQL error", "ParserError")


def _unless_refused(read, predicate: str | None):
    """`read(predicate)`, or `read(None)` when the reader cannot evaluate the predicate (a literal of another
    type than its column, say): pushdown only saves work, the query drops the rows anyway."""
    if predicate is None:
        return read(None)
    try:
        return read(predicate)
    except Exception as exc:
        if not any(marker in str(exc) for marker in _REFUSED):
            raise
        return read(None)


def _estimate_rows(entry: dict) -> int:
    m = entry.get("operationMetrics") or {}

    def n(key):
        try:
            return int(m.get(key, 0) or 0)
        except (TypeError, ValueError):
            return 0

    updated = n("num_updated_rows") + n("num_target_rows_updated") + n("numUpdatedRows")
    return (n("num_added_rows") + n("numOutputRows") + n("num_deleted_rows") + n("numDeletedRows")
            + n("num_target_rows_inserted") + n("num_target_rows_deleted") + 2 * updated) or 1


def _rewrote(entry: dict) -> bool:
    metrics = entry.get("operationMetrics") or {}
    removed = (metrics.get(k) for k in ("num_removed_files", "numRemovedFiles", "numTargetFilesRemoved"))
    return (entry.get("operationParameters") or {}).get("mode") == "Overwrite" or any(int(n or 0) for n in removed)


def _is_missing(exc: Exception) -> bool:
    """Errors that retrying cannot fix: no table there, or no such version."""
    from deltalake.exceptions import TableNotFoundError

    return isinstance(exc, (TableNotFoundError, FileNotFoundError)) or "Invalid table version" in str(exc)


def _is_gone(exc: Exception) -> bool:
    """A data file named by the log no longer exists (object stores say `Object at location ... not found`)."""
    text = str(exc)
    return isinstance(exc, FileNotFoundError) or "not found" in text or "No such file" in text

