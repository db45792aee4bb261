"""Parquet, CSV and Avro files for cloud storage, built from a batch's columns, never row by row.

- Parquet (CockroachDB's layout): the row's columns, then `__crdb__event_type` (`c` insert, `u` update of a
  key that had a row, `d` delete), `__crdb__updated` and `__crdb__mvcc_timestamp` (strings, when asked) and
  `__crdb__before` (the previous row as JSON, with `diff`). A delete carries its key columns and nulls. Key
  columns the row leaves out (a CDC query's projection) are added, so every row names its key; the file's
  metadata lists the key and the row's own columns, so a reader can tell them apart.
- CSV (`initial_scan: only`): the row's columns, no header, as CockroachDB's EXPORT writes.
- Avro: a container file with its schema, one record per message: `after` and `before` (records of the
  row, null for a delete or an insert), `key` (record of the key columns), `updated`, `mvcc_timestamp` and
  `topic` (strings, when asked); every field nullable. Avro has no zone-aware, 8- or 16-bit, unsigned or
  time-of-day type: timestamps become UTC timestamp-micros, small integers int, unsigned long, times micros.
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from feedctl.encoding import frame
from feedctl.encoding.json import JsonSpec, hlc_text, object_json

EVENT_TYPE = "__crdb__event_type"
UPDATED = "__crdb__updated"
MVCC_TIMESTAMP = "__crdb__mvcc_timestamp"
BEFORE = "__crdb__before"
RESOLVED = "__crdb__resolved"
# Parquet key-value metadata: JSON lists of the key's columns and the row's own columns.
META_KEY = b"feedctl.key"
META_ROW = b"feedctl.row"


def _row(df: pl.DataFrame) -> tuple[list[str], list[str], list[pl.Expr]]:
    """(row columns, key columns, expressions): the row's columns with a delete's key filled in, then any key
    column the row lacks."""
    after, key = df.schema[frame.AFTER], df.schema[frame.KEY]
    row = [f.name for f in after.fields]
    keys = [f.name for f in key.fields]
    exprs = [(pl.coalesce(pl.col(frame.AFTER).struct.field(c), pl.col(frame.KEY).struct.field(c)) if c in keys
              else pl.col(frame.AFTER).struct.field(c)).alias(c) for c in row]
    exprs += [pl.col(frame.KEY).struct.field(c).alias(c) for c in keys if c not in row]
    return row, keys, exprs


def parquet_frame(df: pl.DataFrame, spec: JsonSpec) -> pl.DataFrame:
    row, keys, exprs = _row(df)
    op = pl.col(frame.OP)
    exprs.append(pl.when(op == "delete").then(pl.lit("d")).when(op == "update").then(pl.lit("u"))
                 .otherwise(pl.lit("c")).alias(EVENT_TYPE))
    if spec.updated:
        exprs.append(hlc_text(frame.TS_WALL, frame.TS_LOGICAL).alias(UPDATED))
    if spec.mvcc_timestamp:
        exprs.append(hlc_text(frame.MVCC_WALL).alias(MVCC_TIMESTAMP))
    if spec.diff:
        exprs.append(pl.when(pl.col(frame.BEFORE).is_not_null()).then(object_json(df, frame.BEFORE)).alias(BEFORE))
    return df.select(exprs)


def parquet_metadata(df: pl.DataFrame) -> dict[bytes, str]:
    """The key's columns and the row's own columns (the others are key columns added to the row)."""
    row, keys, _ = _row(df)
    return {META_KEY: json.dumps(keys), META_ROW: json.dumps(row)}


def parquet_bytes(frames: list[pl.DataFrame], compression: str | None, metadata: dict | None = None) -> bytes:
    table = pl.concat(frames).to_arrow()
    if metadata:
        table = table.replace_schema_metadata(metadata)
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression or "snappy")
    return out.getvalue()


def resolved_parquet(resolved: str) -> bytes:
    """A resolved timestamp as Parquet: one row, one DECIMAL column `__crdb__resolved`, as CockroachDB writes."""
    from decimal import Decimal

    return parquet_bytes([pl.DataFrame({RESOLVED: [Decimal(resolved)]}, schema={RESOLVED: pl.Decimal(38, 10)})], None)


def csv_frame(df: pl.DataFrame) -> pl.DataFrame:
    """The row's columns; a nested value (CSV has none) as its JSON text."""
    out = []
    for f in df.schema[frame.AFTER].fields:
        value = pl.col(frame.AFTER).struct.field(f.name)
        if isinstance(f.dtype, (pl.Struct, pl.List, pl.Array)):
            value = pl.struct(value.alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")
        out.append(value.alias(f.name))
    return df.select(out)


def utf8_buffers(text: pl.Series) -> tuple[np.ndarray, pa.Buffer]:
    """A string column as Arrow lays it out: the values' offsets (one more than values) into one buffer of
    UTF-8 bytes. Nothing becomes a Python string."""
    array = text.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string: one contiguous buffer
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset:array.offset + len(array) + 1]
    return offsets, array.buffers()[2]


class Lines:
    """Encoded messages as one buffer of UTF-8 bytes, laid out once; a file takes a run of them as it is."""

    def __init__(self, text: pl.Series):
        self.offsets, self.data = utf8_buffers(text)

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def slice(self, start: int, length: int) -> pa.Buffer:
        """The bytes of messages start .. start + length - 1, one after the other."""
        first = int(self.offsets[start])
        return self.data.slice(first, int(self.offsets[start + length]) - first)


def csv_bytes(frames: list[pl.DataFrame]) -> bytes:
    return pl.concat(frames).write_csv(include_header=False).encode("utf-8")


def _size(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if dtype in (pl.String, pl.Categorical):
        return expr.cast(pl.String).str.len_bytes().fill_null(0).cast(pl.Int64)
    if dtype == pl.Binary:
        return expr.bin.size().fill_null(0).cast(pl.Int64)
    if isinstance(dtype, pl.Struct):
        return pl.sum_horizontal([_size(expr.struct.field(f.name), f.dtype) for f in dtype.fields] or [pl.lit(0)])
    if isinstance(dtype, (pl.List, pl.Array)):
        return expr.cast(pl.List(dtype.inner)).list.len().fill_null(0).cast(pl.Int64) * 8
    return pl.lit(8, pl.Int64)


def row_sizes(rows: pl.DataFrame) -> pl.Series:
    """An estimate of each row's size in bytes that depends on the row alone (so files are cut the same
    whatever the batches): strings and binary by length, anything else 8 bytes."""
    return rows.select(pl.sum_horizontal([_size(pl.col(c), t) for c, t in rows.schema.items()]).alias("size")
                       ).to_series()


def _avro_type(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone:
            expr = expr.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        return expr.cast(pl.Datetime("us"))
    if dtype in (pl.Int8, pl.Int16, pl.UInt8, pl.UInt16):
        return expr.cast(pl.Int32)
    if dtype in (pl.UInt32, pl.UInt64):
        return expr.cast(pl.Int64)
    if isinstance(dtype, pl.Time):  # nanoseconds since midnight
        return expr.cast(pl.Int64) // 1000
    if isinstance(dtype, pl.Duration):
        return expr.dt.total_microseconds()
    if dtype == pl.Null:
        return expr.cast(pl.String)
    if isinstance(dtype, pl.Struct):
        inner = pl.struct([_avro_type(expr.struct.field(f.name), f.dtype).alias(f.name) for f in dtype.fields])
        return pl.when(expr.is_not_null()).then(inner)
    if isinstance(dtype, (pl.List, pl.Array)):
        return expr.cast(pl.List(dtype.inner)).list.eval(_avro_type(pl.element(), dtype.inner))
    return expr


def avro_frame(df: pl.DataFrame, spec: JsonSpec) -> pl.DataFrame:
    columns = [("after", frame.AFTER)] + ([("before", frame.BEFORE)] if spec.diff else []) + [("key", frame.KEY)]
    exprs = [_avro_type(pl.col(c), df.schema[c]).alias(name) for name, c in columns]
    if spec.updated:
        exprs.append(hlc_text(frame.TS_WALL, frame.TS_LOGICAL).alias("updated"))
    if spec.mvcc_timestamp:
        exprs.append(hlc_text(frame.MVCC_WALL).alias("mvcc_timestamp"))
    if spec.topic_in_value:
        exprs.append(pl.col(frame.TOPIC).alias("topic"))
    return df.select(exprs)


def avro_name(topic: str) -> str:
    """A valid Avro record name for a topic: letters, digits and `_`, not starting with a digit."""
    name = re.sub(r"\W", "_", topic, flags=re.ASCII)
    return f"_{name}" if not name or name[0].isdigit() else name


def avro_bytes(frames: list[pl.DataFrame], topic: str, compression: str | None) -> bytes:
    out = io.BytesIO()
    # One chunk per column: write_avro assumes every column is cut into the same chunks, which a concat of
    # slices need not give (polars panics on such a frame).
    pl.concat(frames, rechunk=True).write_avro(
        out, compression="deflate" if compression == "gzip" else "uncompressed", name=avro_name(topic))
    return out.getvalue()
