"""Avro container files with their schema, one record per message: `after` and `before` (records of the
row, null for a delete or an insert), `key` (record of the key columns), `updated`, `mvcc_timestamp` and
`topic` (strings, when asked); every field nullable. Avro has no zone-aware, 8- or 16-bit, unsigned or
time-of-day type: timestamps become UTC timestamp-micros, small integers int, unsigned long, times micros;
decimals are strings with every digit (see `_avro_type`).
`compression: gzip` is deflate inside the file.
"""

from __future__ import annotations

import io
import re

import polars as pl

from feedctl import frame
from feedctl.encoding.buffers import row_sizes
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.json import hlc_text, with_topic


def _avro_type(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if isinstance(dtype, pl.Decimal):
        # polars' Avro writer drops the sign byte of a positive unscaled value whose top bit is set (decimal(10,5)
        # 22222.22222 reads back as -20727.45074, in any reader): decimals are written as their text instead,
        # every digit, as JSON messages hold them.
        return expr.cast(pl.String)
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


def avro_frame(df: pl.DataFrame, envelope: Envelope) -> pl.DataFrame:
    columns = [("after", frame.AFTER)] + ([("before", frame.BEFORE)] if envelope.diff else []) + [("key", frame.KEY)]
    exprs = [_avro_type(pl.col(c), df.schema[c]).alias(name) for name, c in columns]
    if envelope.updated:
        exprs.append(hlc_text(frame.TS_WALL, frame.TS_LOGICAL).alias("updated"))
    if envelope.mvcc_timestamp:
        exprs.append(hlc_text(frame.MVCC_WALL).alias("mvcc_timestamp"))
    if envelope.topic_in_value:
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


class AvroEncoder:
    def __init__(self, envelope: Envelope, topic: str, compression: str | None = None):
        self.envelope, self.topic, self.compression = envelope, topic, compression

    def encode(self, df: pl.DataFrame) -> tuple[pl.DataFrame, object]:
        rows = avro_frame(with_topic(df, self.envelope, self.topic), self.envelope)
        return rows, row_sizes(rows).to_numpy()

    def file(self, parts: list) -> bytes:
        return avro_bytes(parts, self.topic, self.compression)
