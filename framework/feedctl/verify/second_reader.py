"""The second reader: what `verify` judges messages against, read from the table by a path that shares
nothing with the one that produced them (`source/`), so that a reader bug cannot hide behind itself.

Here delta-rs replays the log (its list of a version's files, and their partition values as it types them);
the rows deletion vectors delete are read by `deleted_rows`; each data file is read whole by pyarrow (Spark's
INT96 at microseconds), its rows become Python values named by the schema's logical names (a VARIANT
decoded by `variant_values`, apart from the source's decoder), and Arrow builds the table at the version's
types. A version's changes are read per the protocol from its commit: its change
data files, or else the rows its added and removed files hold, with the rows a file's new deletion vector
deletes. Given the table's key, a version that rewrote files (removed some and added others), or every
version of a table whose changes are read from the log, is judged instead by its snapshots: the keys whose
rows differ between the version before and this one, a delete of the row before and an insert of the row
after. Slow, row by row in Python, and meant to be: it judges, it does not stream.
"""

from __future__ import annotations

import datetime as dt
import json
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from feedctl.verify import deleted_rows, variant_values

_CHANGE = "_change_type"
_VERSION = "_commit_version"


class CannotJudge(Exception):
    """The second reader cannot read what verify would judge: said, never guessed."""


class SecondReader:
    def __init__(self, name: str, location: str, storage_options: dict | None):
        self.name, self.location = name, location.rstrip("/")
        self.options = storage_options or None
        self._fs = None
        self._keyed: dict[tuple, dict] = {}

    def _table(self, version: int):
        from deltalake import DeltaTable

        return DeltaTable(self.location, version=version, storage_options=self.options)

    def names_at(self, version: int, names: list[str]) -> list[str]:
        """The names at `version` of the columns the newest version calls `names`: a column keeps its
        physical name across a rename under column mapping."""
        then = _names(json.loads(self._table(version).schema().to_json()))
        if all(n in then for n in names):
            return list(names)
        from deltalake import DeltaTable

        now = _names(json.loads(DeltaTable(self.location, storage_options=self.options).schema().to_json()))
        logical = {physical: name for name, (physical, _) in then.items()}
        return [logical.get(now[n][0], n) if n in now and n not in then else n for n in names]

    def schema(self, version: int) -> pa.Schema:
        """The table's columns at `version` at the types the feed reads them (a VARIANT as its JSON text)."""
        return self._schema(self._table(version))[0]

    def variants(self, version: int) -> tuple[str, ...]:
        """The columns that are VARIANTs at `version`."""
        names = _names(json.loads(self._table(version).schema().to_json()))
        return tuple(n for n, (_, children) in names.items() if children == _VARIANT)

    def rows(self, version: int) -> pa.Table:
        """The table at `version`."""
        table = self._table(version)
        schema, names = self._schema(table)
        adds = _pydict(table.get_add_actions(flatten=True))
        keep = self._kept_rows(table)
        partitions = _partition_columns(table, names)
        out = []
        for i, path in enumerate(adds["path"]):
            values = {logical: adds[f"partition.{logical}"][i] for logical in partitions}
            out += self._file_rows(path, names, values, keep.get(unquote(path)))
        return _table(out, schema)

    def changes(self, first: int, last: int, key: list[str] | None = None, change_files: bool = True) -> pa.Table:
        """The change rows of versions `first`..`last`, read with `last`'s schema, with `_change_type` and
        `_commit_version`. With `key`, a version that rewrote files is the difference of its snapshots, and
        so is every version without `change_files` (the table's changes come from its log)."""
        table = self._table(last)
        schema, names = self._schema(table)
        partitions = _partition_columns(table, names)
        out = []
        for version in range(first, last + 1):
            actions = self._commit(version)
            cdc = [a["cdc"] for a in actions if "cdc" in a] if change_files else []
            rewrote = any("remove" in a and a["remove"].get("dataChange", True) for a in actions) and any(
                "add" in a and a["add"].get("dataChange", True) for a in actions
            )
            if key is not None and not cdc and (rewrote or not change_files):
                out += self._difference(version, key, schema.names)
                continue
            if cdc:
                for action in cdc:
                    values = self._partition_values(action, partitions, schema)
                    out += [
                        dict(row, **{_VERSION: version})
                        for row in self._file_rows(action["path"], names, values, None, extra=_CHANGE)
                    ]
                continue
            adds = {a["add"]["path"]: a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)}
            removes = {
                a["remove"]["path"]: a["remove"]
                for a in actions
                if "remove" in a and a["remove"].get("dataChange", True)
            }
            kept_before = self._kept_rows(self._table(version - 1)) if removes else {}
            kept_after = self._kept_rows(self._table(version)) if adds else {}
            for path, action in removes.items():
                values = self._partition_values(action, partitions, schema, version - 1)
                before = kept_before.get(unquote(path))
                if path in adds:  # a new deletion vector: the rows it no longer keeps are deleted
                    after = kept_after.get(unquote(path))
                    rows = self._file_rows(path, names, values, None)
                    for kind, mask in (
                        ("delete", _gone(before, after, len(rows))),
                        ("insert", _gone(after, before, len(rows))),
                    ):
                        out += [dict(r, **{_CHANGE: kind, _VERSION: version}) for r, m in zip(rows, mask) if m]
                else:
                    out += [
                        dict(r, **{_CHANGE: "delete", _VERSION: version})
                        for r in self._file_rows(path, names, values, before)
                    ]
            for path, action in adds.items():
                if path not in removes:
                    values = self._partition_values(action, partitions, schema)
                    out += [
                        dict(r, **{_CHANGE: "insert", _VERSION: version})
                        for r in self._file_rows(path, names, values, kept_after.get(unquote(path)))
                    ]
        full = pa.schema([*schema, pa.field(_CHANGE, pa.string()), pa.field(_VERSION, pa.int64())])
        return _table(out, full)

    def _difference(self, version: int, key: list[str], names: list[str]) -> list[dict]:
        """The keys whose rows differ between the snapshots before and at `version` (in the columns
        `names`; one a snapshot lacks is null): a delete of the row before, an insert of the row after."""
        before = self._by_key(version - 1, key, names) if version > 0 else {}
        after = self._by_key(version, key, names)
        out = []
        for k in before.keys() | after.keys():
            was, now = before.get(k), after.get(k)
            if repr(was) == repr(now):  # NaN is NaN here
                continue
            if was is not None:
                out.append(dict(was, **{_CHANGE: "delete", _VERSION: version}))
            if now is not None:
                out.append(dict(now, **{_CHANGE: "insert", _VERSION: version}))
        return out

    def _by_key(self, version: int, key: list[str], names: list[str]) -> dict[str, dict]:
        """The rows at `version` by key; the last one read is kept (it is the next version's before)."""
        held = self._keyed.get((version, tuple(key), tuple(names)))
        if held is not None:
            return held
        rows = {}
        key_then, names_then = self.names_at(version, key), self.names_at(version, names)  # renamed since
        for row in self.rows(version).to_pylist():
            k = repr([row.get(c) for c in key_then])
            if k in rows:
                raise CannotJudge(f"table {self.name}: two rows of key {k} at version {version}")
            rows[k] = {c: row.get(then) for c, then in zip(names, names_then)}
        self._keyed = {(version, tuple(key), tuple(names)): rows}
        return rows

    # -- reading ------------------------------------------------------------------------------------------

    def _schema(self, table) -> tuple[pa.Schema, dict]:
        """The version's schema as Arrow, and the tree of physical names (logical name -> (physical,
        children)) from its Delta schema."""
        from feedctl.source.arrow_types import spark_schema
        from feedctl.source.variant import json_schema

        delta_schema = json.loads(table.schema().to_json())
        return spark_schema(json_schema(pa.schema(table.schema().to_arrow()), delta_schema)), _names(delta_schema)

    def _kept_rows(self, table) -> dict:
        """path -> the rows its deletion vector keeps (a list of booleans; rows past it are kept), for the
        files that have one, read by `deleted_rows`."""
        features = table.protocol().reader_features or []
        if "deletionVectors" not in features:
            return {}
        try:
            gone = deleted_rows.deleted(self._filesystem(), table.version(), self._absolute)
        except deleted_rows.Unreadable as exc:
            raise CannotJudge(f"table {self.name} at version {table.version()}: {exc}") from None
        return {path: [i not in rows for i in range(max(rows) + 1)] if rows else [] for path, rows in gone.items()}

    def _commit(self, version: int) -> list[dict]:
        path = f"_delta_log/{version:020d}.json"
        with self._filesystem().open_input_stream(path) as stream:
            return [json.loads(line) for line in stream.read().decode("utf-8").splitlines() if line.strip()]

    def _partition_values(self, action: dict, partitions: dict, schema: pa.Schema, version: int | None = None):
        """The logical partition values of a file named by an action: parsed from the log's strings by Arrow's
        own casts (or, when a `remove` leaves them out, as delta-rs types them at `version`)."""
        raw = action.get("partitionValues")
        if raw is None and partitions:
            found = _pydict(self._table(version).get_add_actions(flatten=True))
            i = found["path"].index(action["path"])
            return {logical: found[f"partition.{logical}"][i] for logical in partitions}
        values = {}
        for logical, physical in partitions.items():
            text = (raw or {}).get(physical)
            type_ = schema.field(logical).type
            if text is None or (text == "" and not pa.types.is_string(type_)):
                values[logical] = None
            elif pa.types.is_timestamp(type_):
                naive = pa.scalar(text.replace("T", " ").rstrip("Z")).cast(pa.timestamp("us"))
                values[logical] = naive.cast(type_).as_py()
            else:
                values[logical] = pa.scalar(text).cast(type_).as_py()
        return values

    def _file_rows(self, path: str, names: dict, partition_values: dict, keep, extra: str | None = None):
        relative = unquote(path)
        with self._filesystem().open_input_file(relative) as handle:
            data = pq.read_table(handle, coerce_int96_timestamp_unit="us")
        for logical, (physical, children) in names.items():  # VARIANTs decoded with their stored types
            if children == _VARIANT and physical in data.column_names:
                typed = variant_values.typed_type(data.schema.field(physical).type)
                texts = [self._variant(v, typed) for v in data[physical].to_pylist()]
                data = data.set_column(data.schema.get_field_index(physical), physical, pa.array(texts, pa.string()))
        physical_rows = data.to_pylist()
        if keep is not None and len(keep) > len(physical_rows):
            raise CannotJudge(
                f"table {self.name}: {relative} has {len(physical_rows)} rows, its deletion vector {len(keep)}"
            )
        rows = []
        for i, stored in enumerate(physical_rows):
            if keep is not None and i < len(keep) and not keep[i]:  # rows past the vector are kept
                continue
            row = {
                logical: stored.get(physical) if children == _VARIANT else _logical(stored.get(physical), children)
                for logical, (physical, children) in names.items()
            }
            row.update(partition_values)
            if extra:
                row[extra] = stored[extra]
            rows.append(row)
        return rows

    @staticmethod
    def _variant(stored: dict | None, typed) -> str | None:
        try:
            return variant_values.json_text(stored, typed)
        except (variant_values.BadVariant, IndexError, UnicodeDecodeError, KeyError) as exc:
            raise CannotJudge(f"a VARIANT that cannot be read: {exc}") from None

    def _filesystem(self):
        if self._fs is None:
            import pyarrow.fs as pa_fs

            if "://" in self.location and not self.location.startswith("file://"):
                from deltalake.fs import DeltaStorageHandler

                self._fs = pa_fs.PyFileSystem(DeltaStorageHandler(self.location, self.options))
            else:
                root = self.location.removeprefix("file://")
                self._fs = pa_fs.SubTreeFileSystem(root, pa_fs.LocalFileSystem())
        return self._fs

    def _absolute(self, uri: str):
        """The file system and path of a file named by an absolute URI (`file:/...`, `s3://...`): on this
        host, or in the table's object store with its options, in a folder of its own."""
        import pyarrow.fs as pa_fs

        parsed = urlsplit(uri)
        if parsed.scheme in ("", "file"):
            return pa_fs.LocalFileSystem(), unquote(parsed.path)
        folder, name = unquote(parsed.path).rsplit("/", 1)
        from deltalake.fs import DeltaStorageHandler

        return pa_fs.PyFileSystem(DeltaStorageHandler(f"{parsed.scheme}://{parsed.netloc}{folder}", self.options)), name


def _names(delta_type) -> dict:
    """logical name -> (physical name, the same for its children) of a Delta struct type."""
    out = {}
    for f in delta_type.get("fields", []):
        physical = (f.get("metadata") or {}).get("delta.columnMapping.physicalName", f["name"])
        out[f["name"]] = (physical, _children(f["type"]))
    return out


_VARIANT = ("variant", None)


def _children(delta_type):
    if delta_type == "variant":
        return _VARIANT
    if not isinstance(delta_type, dict):
        return None
    if delta_type["type"] == "struct":
        return ("struct", _names(delta_type))
    if delta_type["type"] == "array":
        return ("array", _children(delta_type["elementType"]))
    if delta_type["type"] == "map":
        return ("map", (_children(delta_type["keyType"]), _children(delta_type["valueType"])))
    return None


def _logical(value, children):
    """A stored value with its nested fields named by their logical names."""
    if value is None or children is None:
        return value
    kind, inner = children
    if kind == "variant":  # inside a struct, list or map: its shredded types are not at hand
        return SecondReader._variant(value, None)
    if kind == "struct":
        return {logical: _logical(value.get(physical), sub) for logical, (physical, sub) in inner.items()}
    if kind == "array":
        return [_logical(v, inner) for v in value]
    return [(_logical(k, inner[0]), _logical(v, inner[1])) for k, v in value]


def _partition_columns(table, names: dict) -> dict:
    """logical -> physical name of the partition columns."""
    return {c: names[c][0] for c in table.metadata().partition_columns}


def _gone(kept_before, kept_after, rows: int) -> list[bool]:
    """Rows kept before and not after."""

    def full(kept):
        kept = kept or []
        return [*kept, *[True] * (rows - len(kept))]

    return [b and not a for b, a in zip(full(kept_before), full(kept_after))]


def _pydict(table) -> dict:
    return pa.table(table).to_pydict()


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """The rows at `schema`'s types: a column whose values were written at a narrower type (type widening)
    is built at that type and widened by Arrow's cast, which refuses what would change a value."""
    columns = []
    for f in schema:
        values = [row.get(f.name) for row in rows]
        try:
            try:
                columns.append(pa.array(values, f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                if pa.types.is_timestamp(f.type):  # a date widened to a timestamp: its midnight
                    values = [dt.datetime.combine(v, dt.time()) if type(v) is dt.date else v for v in values]
                    columns.append(pa.array(values, f.type))
                else:
                    columns.append(pa.array(values).cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
            raise CannotJudge(f"values of column {f.name} do not fit its type {f.type}: {exc}") from None
    return pa.Table.from_arrays(columns, schema=schema)
