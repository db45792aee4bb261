"""The Arrow types feedctl reads a table's rows as: those Spark's Arrow conversion takes, and nullable at
every level.

delta-rs hands out `string_view`/`binary_view` and a `uint64` commit version, which Spark rejects. And a
table's schema says NOT NULL for every `NOT NULL` column, identity column and primary key while a data
file's Arrow schema may say otherwise (or the reverse, files written before a constraint was added): were
nullability part of the type, batches read from two files would be two types, and one stream of them
could not be read. Nothing downstream needs it (a delete nulls every column of a change's row), so what is
read is nullable throughout; a table's schema as its log says it (`DeltaSource.schema`) keeps it, where a
change of it is a schema change.
"""

from __future__ import annotations

import pyarrow as pa


def spark_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_uint64(t) or pa.types.is_uint32(t):
        return pa.int64()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(spark_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(spark_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(spark_type(t.key_type), spark_type(t.item_type))
    return t


def spark_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(spark_type(f.type)) for f in schema])


def nullable(field: pa.Field) -> pa.Field:
    """`field` with every level nullable but a map's keys, which Arrow never lets be null."""
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([nullable(f) for f in t])
    elif pa.types.is_list(t):
        t = pa.list_(nullable(t.value_field))
    elif pa.types.is_large_list(t):
        t = pa.large_list(nullable(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(t.key_field, nullable(t.item_field))
    return field.with_type(t).with_nullable(True)


def read_schema(schema: pa.Schema) -> pa.Schema:
    """The schema rows of a table of `schema` are read as: Spark's types, nullable at every level."""
    return pa.schema([nullable(f) for f in spark_schema(schema)])


def normalize(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with the types `read_schema` says."""
    target = read_schema(batch.schema)
    return batch if target == batch.schema else batch.cast(target)
