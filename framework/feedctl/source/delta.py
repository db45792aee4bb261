"""A Delta table as feedctl reads it: versions, commit times and schemas through delta-rs (`deltalake`);
snapshots and change data read per the protocol from the files the log names (`table_reader`), since
delta-rs's readers refuse whole tables over a feature (deletion vectors, v2 checkpoints) or misread values
(INT96 timestamps wrap around nanoseconds, escaped partition folders are not found).

Every read returns Arrow of the types `arrow_types` says: those Spark takes, nullable at every level.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from feedctl.diagnostics import first_line
from feedctl.errors import TerminalError
from feedctl.source import commit_metrics, reader_filter, table_features, variant
from feedctl.source.arrow_types import normalize, read_schema, spark_schema
from feedctl.source.change_source import ChangeDataOff, ChangeSource, change_data_on
from feedctl.source.data_file import DataFileError, Layout
from feedctl.source.deletion_vector import DeletionVectorError
from feedctl.source.delta_log import CommitInfo, FileGone, LogError, commit_path
from feedctl.source.partition_value import PartitionValueError
from feedctl.source.schema_change import SchemaChange
from feedctl.source.schema_history import SchemaHistory
from feedctl.source.table_reader import CHANGE_FIELDS, TableReader
from feedctl.source.table_store import TableStore, local_root

_VERSIONS_KEPT = 64  # layouts of versions kept per table: a node following a table for weeks reads many
_COMMITS_KEPT = 4096  # commits kept per table (a few hundred bytes each)
# Commits read one after the other, at most: a few new commits cost a few reads, not the threads of a pool
# (hundreds of feeds on a node each read the commits of a busy table).
_READ_ALONE = 4

# What a table's files can hold that feedctl cannot read as the table's values: no retry fixes it.
_UNREADABLE = (DataFileError, DeletionVectorError, PartitionValueError, LogError, ChangeDataOff)


# What delta-rs takes from the environment when a table's storage options do not say (object_store's names):
# resolved in the driver for the tasks that read a table themselves, whose hosts may not have it.
_STORE_ENV = {
    "s3": (
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ALLOW_HTTP",
    ),
    "gs": ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
    "az": (
        "AZURE_STORAGE_ACCOUNT_NAME",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_CLIENT_ID",
        "AZURE_STORAGE_CLIENT_SECRET",
        "AZURE_STORAGE_TENANT_ID",
    ),
}
_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "az": "az", "azure": "az", "abfs": "az", "abfss": "az"}


# The way on once a table's history a job needs is gone.
HISTORY_GONE = (
    "A new job can scan the table at its newest version and follow it from there: feedctl run --new-job --rescan "
    "-s FEED (`feedctl retention TABLE` says how to keep the history of the jobs that remain)"
)


class SourceError(TerminalError):
    """A table cannot give what the feed needs; the message names the table and the versions."""


@dataclass(frozen=True)
class Commit:
    version: int
    commit_ns: int  # the commit's own timestamp (in-commit timestamp when the table has them)
    operation: str
    rows: int  # estimate of change rows, from the commit's metrics
    rewrote: bool = False  # the commit rewrote existing rows (an overwrite, or files removed)
    metadata: bool = True  # the commit changed the table's metadata: its schema may differ from the version before


class SnapshotFiles(NamedTuple):
    files: int  # the data files a read opens...
    bytes: int
    all_files: int  # ...of the snapshot's
    all_bytes: int
    rows: int  # of the files read, by the Delta log's statistics (files written without them count none)


class DeltaSource:
    """One table, named for messages (`movr.rides`) and opened at `location`, its changes read from
    `changes` (`change_source`)."""

    def __init__(
        self,
        name: str,
        location: str,
        storage_options: dict | None = None,
        changes: ChangeSource = ChangeSource.AUTO,
    ):
        self.name = name
        self.location = location
        self.storage_options = storage_options or None
        self.change_source = ChangeSource(changes)
        self._table = None
        self._root = local_root(location)  # None: in an object store
        self._commits: dict[int, Commit] = {}  # the newest commits read: a commit never changes
        self._layouts: dict[int, tuple[Layout, dict]] = {}  # the newest versions read: layout, properties
        self._reader: TableReader | None = None
        self._history = SchemaHistory(name, self._load_schema, self.commits, self._commits.get)

    def handle(self) -> DeltaSource:
        """The same table through a handle of its own: a delta-rs table is refreshed in place, so a handle
        is not shared across threads."""
        return DeltaSource(self.name, self.location, self.storage_options, self.change_source)

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
            refused = table_features.refusal_in_log(self.reader().log)
            if refused is not None:
                raise SourceError(f"table {self.name} {refused}") from None
            if not _is_missing(exc):
                raise  # a storage hiccup: the caller retries
            at = f" at version {version}" if version is not None else ""
            raise SourceError(f"table {self.name}{at} cannot be opened at {self.location}: {first_line(exc)}") from None

    def task_options(self) -> dict | None:
        """The table's storage options as a task on another host needs them: what delta-rs would take from
        this process's environment, then the table's own options over it."""
        scheme = _SCHEMES.get(self.location.split("://", 1)[0].lower() if "://" in self.location else "")
        found = {name: os.environ[name] for name in _STORE_ENV.get(scheme, ()) if os.environ.get(name)}
        return {**found, **(self.storage_options or {})} or None

    def latest_version(self) -> int:
        return self.table().version()

    def newest_version(self, known: int | None) -> int:
        """The table's newest version, for a look that found `known` last time (None: never looked). On this
        host's file system, a table with nothing new costs two looks at its log's folder (`known`'s commit
        there, the next one not) rather than delta-rs's refresh (0.4 ms of CPU, and the interpreter let go and
        taken again among a busy node's threads): a node looks at each of its tables every poll interval.
        Log cleanup never removes the newest commit: with `known`'s gone, the table was removed or replaced
        (delta-rs's refresh would go on from `known`), and is opened anew."""
        if known is not None and self._root is not None:
            if not os.path.exists(os.path.join(self._root, commit_path(known))):
                self._table = None
            elif not os.path.exists(os.path.join(self._root, commit_path(known + 1))):
                return known
        return self.latest_version()

    def reader(self) -> TableReader:
        if self._reader is None:
            self._reader = TableReader(TableStore(self.location, self.task_options()))
        return self._reader

    def layout(self, version: int) -> Layout:
        """How the files of `version` hold its rows (schema, physical names, partition columns)."""
        return self._version(version)[0]

    def names_at(self, version: int, names: list[str]) -> list[str]:
        """The names at `version` of the columns the newest version names `names` (a key project.yml
        declares): under column mapping a rename changes a column's logical name only, so the history before
        it holds the same column, found by its physical name, under its name then. A name neither version
        holds is kept, for the caller to find missing."""
        at = self.layout(version)
        if not at.mapped or all(n in at.root.children for n in names):
            return list(names)
        newest = self.layout(self.latest_version()).root.children
        by_physical = {node.physical: name for name, node in at.root.children.items()}
        return [
            name if name in at.root.children or name not in newest else by_physical.get(newest[name].physical, name)
            for name in names
        ]

    def change_data_on(self, version: int) -> bool:
        """Whether the table's change data feed is on at `version`."""
        return change_data_on(self._version(version)[1])

    def newest_properties(self) -> tuple[int, dict]:
        """The newest version and the table's properties (`delta.*` configuration) there, in one look at its
        log, without opening that version anew."""
        table = self.table()
        return table.version(), dict(table.metadata().configuration)

    def _version(self, version: int) -> tuple[Layout, dict]:
        """A version's layout and properties; the newest few are kept (a batch's first version is the last
        one of the batch before)."""
        if version not in self._layouts:
            table = self.table(version)
            metadata = table.metadata()
            self.check_features(table, version)
            config = metadata.configuration
            layout = Layout.of(
                read_schema(self.schema(version)),
                table.schema().to_json(),
                metadata.partition_columns,
                config.get("delta.columnMapping.mode", "none"),
            )
            if len(self._layouts) >= _VERSIONS_KEPT:
                del self._layouts[next(iter(self._layouts))]
            self._layouts[version] = (layout, dict(config))
        return self._layouts[version]

    def check_features(self, table=None, version: int | None = None) -> None:
        """Refuse a table whose protocol asks for what feedctl cannot read, naming the feature."""
        table = table if table is not None else self.table(version)
        refused = table_features.unreadable(table.protocol())
        if refused:
            at = f" at version {version}" if version is not None else ""
            raise SourceError(f"table {self.name}{at} {refused}")

    def check_readable(self, from_version: int, changes: bool = True) -> None:
        """Refuse what feedctl cannot read, naming table and versions: a table feature it does not read, or
        (`changes`, for a table whose changes come from its change data feed alone) a change data feed that
        is off."""
        table = self.table()
        self.check_features(table)
        if not changes or self.change_source != ChangeSource.CDF:
            return
        config = table.metadata().configuration
        for version, conf in ((from_version, None), (table.version(), config)):
            conf = conf if conf is not None else self.table(version).metadata().configuration
            if not change_data_on(conf):
                raise SourceError(
                    f"table {self.name} does not have its change data feed enabled at version "
                    f"{version}; set delta.enableChangeDataFeed=true (changes before that cannot "
                    "be read from it), or read its changes from the log (`changes: log` or `auto`)"
                )

    def commits(self, after_version: int, up_to: int) -> list[Commit]:
        """Commits after `after_version` up to `up_to`, oldest first, each read from its own log file.

        Not delta-rs's `history()`: it numbers the commits it lists by counting back from the newest version
        it finds, so a commit landing while it lists shifts every number by one (delta-io/delta-rs#4488),
        and a version got the next one's time."""

        def info(version: int) -> CommitInfo | None:
            try:
                return self.reader().log.info(version)
            except FileGone:  # cleaned from the log: said below with the others gone
                return None
            except LogError as exc:  # there, and unreadable
                raise SourceError(f"table {self.name}: {exc}") from None

        wanted = range(after_version + 1, up_to + 1)
        found = {v: self._commits[v] for v in wanted if v in self._commits}
        missing = [v for v in wanted if v not in found]
        if len(missing) > _READ_ALONE:  # a cursor far back, a job catching up: read side by side, as an object
            with ThreadPoolExecutor(min(16, len(missing))) as pool:  # store's latency, not its bandwidth, bounds it
                read = list(pool.map(info, missing))
        else:
            read = [info(v) for v in missing]
        gone = [v for v, r in zip(missing, read) if r is None]
        if gone:
            which = f"version {gone[0]} is" if len(gone) == 1 else f"versions {gone[0]}..{gone[-1]} are"
            raise SourceError(
                f"table {self.name}: {which} no longer in its log (cleaned up or vacuumed); the feed cannot "
                f"continue from version {after_version}. {HISTORY_GONE}"
            )
        for version, each in zip(missing, read):
            from_log = self.change_source == ChangeSource.LOG or not each.change_files
            found[version] = Commit(
                version,
                each.commit_ns,
                str(each.info.get("operation", "")),
                commit_metrics.rows_read(each.info, from_log),
                commit_metrics.rewrote(each.info),
                each.metadata,
            )
            if len(self._commits) >= _COMMITS_KEPT:
                del self._commits[next(iter(self._commits))]
            self._commits[version] = found[version]
        return [found[v] for v in wanted]

    def changes(
        self,
        after_version: int,
        to_version: int,
        columns: list[str] | None = None,
        predicate: str | None = None,
        key: list[str] | None = None,
    ) -> pa.RecordBatchReader:
        """The changes of versions (after_version, to_version], as a stream of batches: `columns` (all when
        None) and the change data feed's columns; with `predicate` (pushdown), only the rows it keeps, and
        the files it rules out are not read. Read with `to_version`'s schema (a batch's versions share one).
        Given the `key`, rows a version read from the log only rewrote are left out."""
        reading = f"table {self.name}: cannot read changes of versions {after_version + 1}..{to_version}"
        try:
            layout = self.layout(to_version)
            present = None if columns is None else [c for c in dict.fromkeys(columns) if c in layout.schema.names]
            fields = [layout.schema.field(c) for c in (present if present is not None else layout.schema.names)]
            enabled = after_version >= 0 and self.change_data_on(after_version)
            batches = self.reader().changes(
                range(after_version + 1, to_version + 1),
                layout,
                present,
                reader_filter.parse(predicate),
                enabled,
                self.change_source,
                key,
            )
        except Exception as exc:
            raise _classified(exc, reading) from None
        return _normalized(pa.schema([*fields, *CHANGE_FIELDS]), batches, reading)

    def snapshot(
        self,
        version: int,
        columns: list[str] | None = None,
        share: int = 0,
        shares: int = 1,
        predicate: str | None = None,
    ) -> pa.RecordBatchReader:
        """The table's rows at `version`, streamed; or share `share` of `shares` of them: its data files
        dealt out in turn, or their row groups when there are fewer files than shares. Every row is in one
        share, and in the same one each time, so a scan's task reads the same rows when run again. With
        `predicate` (pushdown), files it rules out are not read, nor rows it drops."""
        reading = f"table {self.name}: cannot read version {version}"
        try:
            layout = self.layout(version)
            schema = layout.schema if columns is None else pa.schema([layout.schema.field(c) for c in columns])
            batches = self.reader().rows(version, layout, columns, share, shares, reader_filter.parse(predicate))
        except Exception as exc:
            raise _classified(exc, reading) from None
        return _normalized(schema, batches, reading)

    def snapshot_files(self, version: int, predicate: str | None = None) -> SnapshotFiles:
        """What a snapshot read with `predicate` opens, and the whole snapshot."""
        try:
            layout = self.layout(version)
            every = self.reader().log.files(version)
            read = self.reader().files(version, layout, reader_filter.parse(predicate))
        except Exception as exc:
            raise _classified(exc, f"table {self.name}: cannot list the files of version {version}") from None
        return SnapshotFiles(
            len(read),
            sum(f.size for f in read),
            len(every),
            sum(f.size for f in every),
            sum(f.num_records or 0 for f in read),
        )

    def read_estimate(self, columns: list[str] | None = None, predicate: str | None = None) -> tuple[float, int]:
        """What a feed reading `columns` of the files `predicate` leaves reads of a change: the share of the
        table's rows (by the current snapshot's bytes), and the Arrow bytes of an average row (from a sample).
        Sizes batches by what is read."""
        version = self.latest_version()
        files = self.snapshot_files(version, predicate)
        names = self.layout(version).schema.names
        present = None if columns is None else [c for c in columns if c in names]  # some dropped since
        rows, size = 0, 0
        for batch in self.snapshot(version, present, predicate=predicate):
            rows, size = rows + batch.num_rows, size + batch.nbytes
            if rows >= 1000:
                break
        row_bytes = max(1, size // rows) if rows else 256
        return (files.bytes / files.all_bytes if files.all_bytes else 1.0), row_bytes

    def schema(self, version: int | None = None) -> pa.Schema:
        """The table's schema at `version` (None: the newest, read anew), read once (`SchemaHistory`)."""
        return self._load_schema(None) if version is None else self._history.at(version)

    def _load_schema(self, version: int | None) -> pa.Schema:
        loaded = self._table is not None and self._table.version() == version  # the newest, already open
        if not loaded and version is not None and self._table is not None and self._table.version() < version:
            # A version newer than the one open (a coordinator told the newest by its node's watch): read
            # forward from it, as `update_incremental` does, rather than the whole log anew.
            self._table.load_as_version(version)
            loaded = True
        schema = (self._table if loaded else self.table(version)).schema()
        return spark_schema(variant.json_schema(pa.schema(schema.to_arrow()), json.loads(schema.to_json())))

    def schema_changes(self, after_version: int, up_to: int) -> list[int]:
        """The versions in (after_version, up_to] whose schema differs from the version before."""
        return self._history.changes(after_version, up_to)

    def schema_change(self, version: int) -> SchemaChange:
        """How `version` changed the schema of the version before it."""
        return self._history.change(version)

    def values(self, column: str, version: int, after_version: int | None = None) -> set:
        """The distinct values of `column` in the changes of versions (after_version, version], or without
        `after_version`, in the snapshot at `version`: one column read."""
        reader = (
            self.snapshot(version, [column])
            if after_version is None
            else self.changes(after_version, version, [column])
        )
        found = set()
        for batch in reader:
            found.update(pc.unique(batch.column(column)).to_pylist())
        return found


def of_table(fqn: str, table) -> DeltaSource:
    """The source of a table project.yml declares (`project.model.TableDef`)."""
    return DeltaSource(fqn, table.location, table.storage_options, table.changes)


def _normalized(schema: pa.Schema, batches, reading: str) -> pa.RecordBatchReader:
    """`batches` as one stream of `schema`'s read types (`arrow_types`): a batch whose nullability differs
    from the others' is the same rows. Data files are opened while streaming, so what a read raises then (a
    file that is gone, values that cannot be read) is classified then, saying what was being read
    (`reading`)."""
    schema = read_schema(schema)

    def normalized():
        try:
            for batch in batches:
                yield normalize(batch)
        except Exception as exc:
            raise _classified(exc, reading) from None

    return pa.RecordBatchReader.from_batches(schema, normalized())


def _classified(exc: Exception, reading: str) -> Exception:
    """What a read raised, as the caller handles it: what no retry fixes (a table or version that is not
    there, a file that is gone, values that cannot be read) a SourceError saying what was being read;
    anything else (a storage hiccup) as it is, to be retried."""
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, _UNREADABLE):
        return SourceError(f"{reading}: {first_line(exc)}")
    if _is_gone(exc):  # the table was opened: a file its log names is not there
        return SourceError(f"{reading}: a data file is gone (vacuumed?): {first_line(exc)}. {HISTORY_GONE}")
    if _is_missing(exc):
        return SourceError(f"{reading}: {first_line(exc)}")
    return exc


# How delta-rs says a version is not there, or its log cannot be parsed: no retry changes either.
_LOG_UNREADABLE = ("Invalid table version", "Invalid JSON in log record", "Json error", "json align")


def _is_missing(exc: Exception) -> bool:
    """Errors that retrying cannot fix: no table there, or no such version."""
    from deltalake.exceptions import TableNotFoundError

    text = str(exc)
    return isinstance(exc, (TableNotFoundError, FileNotFoundError)) or any(marker in text for marker in _LOG_UNREADABLE)


def _is_gone(exc: Exception) -> bool:
    """A data file named by the log no longer exists (object stores say `Object at location ... not found`)."""
    text = str(exc)
    return isinstance(exc, FileNotFoundError) or "not found" in text or "No such file" in text
