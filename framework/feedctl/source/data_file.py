"""One Parquet file of a Delta table read as the table's rows at one version, per the protocol:

- columns found by their physical names, or by field id in column mapping's `id` mode, at every depth, and
  named by their logical names; a column the file does not have (added after it was written) is null;
- values conformed to the version's types: type widening, Spark's INT96 timestamps (read at microseconds,
  so years 1 to 9999 keep their value rather than wrapping around nanoseconds), timestamps written at
  nanoseconds (Delta's are microseconds);
- partition columns from the log's partition values, not from the folder names;
- the rows a deletion vector deletes left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from feedctl.source import partition_value, variant
from feedctl.source.deletion_vector import kept

_PHYSICAL = "delta.columnMapping.physicalName"
_ID = "delta.columnMapping.id"
_FIELD_ID = b"PARQUET:field_id"


class DataFileError(Exception):
    """A data file whose values cannot be read as the table's types without changing them."""


@dataclass(frozen=True)
class Node:
    """Where a logical field is in the files: its physical name and id, and those of its children."""

    physical: str
    id: int | None = None
    children: dict[str, Node] = field(default_factory=dict)  # a struct's fields, by logical name
    element: Node | None = None  # a list's
    key: Node | None = None  # a map's
    value: Node | None = None
    variant: bool = False  # a VARIANT: its struct of binaries read as JSON text


def _node(name: str, metadata: dict, type_) -> Node:
    physical = metadata.get(_PHYSICAL, name)
    found_id = metadata.get(_ID)
    if variant.json_type(type_):
        return Node(physical, found_id, variant=True)
    if isinstance(type_, dict):
        kind = type_.get("type")
        if kind == "struct":
            return Node(
                physical,
                found_id,
                {f["name"]: _node(f["name"], f.get("metadata") or {}, f["type"]) for f in type_["fields"]},
            )
        if kind == "array":
            return Node(physical, found_id, element=_node("element", {}, type_["elementType"]))
        if kind == "map":
            return Node(
                physical, found_id, key=_node("key", {}, type_["keyType"]), value=_node("value", {}, type_["valueType"])
            )
    return Node(physical, found_id)


@dataclass(frozen=True)
class Layout:
    """How the files of one version hold its rows."""

    schema: pa.Schema  # the logical schema, as feedctl reads it
    root: Node  # the physical names (and ids) of its columns
    partition_columns: tuple[str, ...]  # logical names
    by_id: bool  # column mapping's `id` mode: columns are matched by Parquet field id
    mapped: bool  # column mapping is on: files name columns by their physical names

    @classmethod
    def of(cls, schema: pa.Schema, delta_schema_json: str, partition_columns, mapping_mode: str) -> Layout:
        fields = json.loads(delta_schema_json)
        return cls(
            schema, _node("", {}, fields), tuple(partition_columns), mapping_mode == "id", mapping_mode != "none"
        )

    @property
    def variants(self) -> tuple[str, ...]:
        """The columns that are VARIANTs, read as their JSON text."""
        return tuple(name for name, node in self.root.children.items() if node.variant)

    def physical(self, column: str) -> str:
        return self.root.children[column].physical


def read(
    handle,
    layout: Layout,
    partition_values: dict,
    columns: list[str] | None = None,
    deleted: np.ndarray | None = None,
    row_groups: list[int] | None = None,
    extra: list[str] = (),
    only: np.ndarray | None = None,
) -> Iterator[pa.RecordBatch]:
    """The file's rows as record batches of `layout`'s `columns` (all when None), without the rows
    `deleted` (sorted row indexes), or with only the rows `only`; `extra`: physical columns kept as they are
    (a change data file's `_change_type`)."""
    parquet = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us", pre_buffer=True)
    names = columns if columns is not None else layout.schema.names
    wanted = [layout.schema.field(c) for c in names]
    stored = parquet.schema_arrow
    located = {
        f.name: _locate(stored, layout.root.children[f.name], layout.by_id)
        for f in wanted
        if f.name not in layout.partition_columns
    }
    read_columns = sorted({stored.field(i).name for i in located.values() if i is not None} | set(extra))
    groups = list(range(parquet.num_row_groups)) if row_groups is None else row_groups
    starts = np.cumsum([0] + [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)])
    schema = pa.schema([*wanted, *(stored.field(c) for c in extra)])
    for group in groups:
        offset = int(starts[group])
        for batch in parquet.iter_batches(row_groups=[group], columns=read_columns, use_threads=True):
            rows = batch.num_rows
            arrays = []
            for f in wanted:
                if f.name in layout.partition_columns:
                    arrays.append(partition_value.column(partition_values.get(layout.physical(f.name)), f.type, rows))
                elif located[f.name] is None:
                    arrays.append(pa.nulls(rows, f.type))
                else:
                    column = batch.column(stored.field(located[f.name]).name)
                    if layout.mapped or column.type != f.type:
                        try:
                            column = conform(column, f.type, layout.root.children[f.name], layout.by_id)
                        except DataFileError as exc:
                            raise DataFileError(f"column {f.name}: {exc}") from None
                    arrays.append(column)
            arrays += [batch.column(c) for c in extra]
            out = pa.RecordBatch.from_arrays(arrays, schema=schema)
            if only is not None:
                mask = np.isin(np.arange(offset, offset + rows), only)
            else:
                mask = None if deleted is None else kept(rows, deleted, offset)
            offset += rows
            yield out if mask is None else out.filter(pa.array(mask))


def _locate(stored: pa.Schema | pa.StructType, node: Node, by_id: bool) -> int | None:
    """The index of `node`'s field among `stored`'s, or None when the file does not have it."""
    fields = list(stored)
    if by_id and node.id is not None:
        for i, f in enumerate(fields):
            if f.metadata and f.metadata.get(_FIELD_ID) == str(node.id).encode():
                return i
    for i, f in enumerate(fields):
        if f.name == node.physical:
            return i
    return None


def conform(array: pa.Array, type_: pa.DataType, node: Node, by_id: bool = False) -> pa.Array:
    """`array` as read from a file, with the logical names and types of `type_`."""
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([conform(c, type_, node, by_id) for c in array.chunks], type_)
    if node.variant:
        try:
            return variant.to_json(array)
        except variant.VariantError as exc:
            raise DataFileError(f"a VARIANT that cannot be read: {exc}") from None
    if array.type == type_ and not node.children and node.element is None and node.key is None:
        return array
    nulls = array.is_null() if array.null_count else None
    if pa.types.is_struct(type_) and pa.types.is_struct(array.type):
        children = []
        for f in type_:
            child = node.children.get(f.name, Node(f.name))
            index = _locate(array.type, child, by_id)
            children.append(
                pa.nulls(len(array), f.type) if index is None else conform(array.field(index), f.type, child, by_id)
            )
        return pa.StructArray.from_arrays(children, fields=list(type_), mask=nulls)
    if pa.types.is_list(type_) and (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        values = conform(array.values, type_.value_type, node.element or Node("element"), by_id)
        return pa.ListArray.from_arrays(array.offsets.cast(pa.int32()), values, type=type_, mask=nulls)
    if pa.types.is_map(type_) and pa.types.is_map(array.type):
        keys = conform(array.keys, type_.key_type, node.key or Node("key"), by_id)
        items = conform(array.items, type_.item_type, node.value or Node("value"), by_id)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=type_, mask=nulls)
    return _cast(array, type_)


def _cast(array: pa.Array, type_: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(type_) and pa.types.is_timestamp(array.type):
        naive = array.cast(pa.timestamp(array.type.unit))  # INT96 carries no time zone: it is UTC
        if naive.type.unit == "ns" and type_.unit == "us":  # Delta keeps microseconds: what is below goes
            naive = pc.floor_temporal(naive, unit="microsecond").cast(pa.timestamp("us"))
        return naive.cast(type_)
    try:
        return array.cast(type_)  # safe: a value that would change is an error
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataFileError(f"values of type {array.type} cannot be read as {type_}: {exc}") from None
