"""Avro container files with their schema, one record per message: `after` and `before` (records of the
row, null for a delete or an insert), `key` (record of the key columns), `updated`, `mvcc_timestamp` and
`topic` (strings, when asked); every field nullable. Avro has no zone-aware, 8- or 16-bit, unsigned or
time-of-day type: zone-aware timestamps become UTC timestamp-micros (those without a zone
local-timestamp-micros), small integers int, unsigned long, times micros;
decimals are strings with every digit (see `_avro_type`). Maps are Avro maps, whose keys are strings: a key
of another type is its string form, as in JSON messages.
`compression: gzip` is deflate inside the file.

polars writes the files, column by column, under a schema made right where its own is not (UTC timestamps),
except those with a map column, which its Avro writer cannot write (nor its reader read): fastavro writes
those, a record at a time, under the schema polars gives the same frame with each map as a list of its
entries, those lists made maps again.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator

import polars as pl

from feedctl import frame
from feedctl.encoding import avro_container
from feedctl.encoding.buffers import row_sizes
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.json import hlc_text, map_key_text, with_topic


def _avro_type(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if isinstance(dtype, pl.Decimal):
        # polars' Avro writer drops the sign byte of a positive unscaled value whose top bit is set (decimal(10,5)
        # 22222.22222 reads back as -20727.45074, in any reader): decimals are written as their text instead,
        # every digit, as JSON messages hold them.
        return expr.cast(pl.String)
    if isinstance(dtype, pl.Datetime):  # an instant stays one: UTC, Avro's timestamp-micros
        if dtype.time_zone:
            return expr.dt.convert_time_zone("UTC").cast(pl.Datetime("us", "UTC"))
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
    if isinstance(dtype, pl.Map):
        entry = pl.element()
        key = map_key_text(entry.struct.field("key"), dtype.key)
        value = _avro_type(entry.struct.field("value"), dtype.value)
        return expr.map.entries().list.eval(pl.struct(key.alias("key"), value.alias("value"))).list.to_map()
    return expr


def _has_map(dtype: pl.DataType) -> bool:
    if isinstance(dtype, pl.Map):
        return True
    if isinstance(dtype, pl.Struct):
        return any(_has_map(f.dtype) for f in dtype.fields)
    if isinstance(dtype, (pl.List, pl.Array)):
        return _has_map(dtype.inner)
    return False


def _writable(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """`expr` as polars' Avro writer takes it: each map, at any depth, the list of its entries (`key`, `value`),
    and each UTC timestamp without its zone (it writes none)."""
    if isinstance(dtype, pl.Map):
        entry = pl.element()
        value = _writable(entry.struct.field("value"), dtype.value)
        return expr.map.entries().list.eval(pl.struct(entry.struct.field("key").alias("key"), value.alias("value")))
    if isinstance(dtype, pl.Datetime) and dtype.time_zone:
        return expr.dt.replace_time_zone(None)
    if isinstance(dtype, pl.Struct):
        inner = pl.struct([_writable(expr.struct.field(f.name), f.dtype).alias(f.name) for f in dtype.fields])
        return pl.when(expr.is_not_null()).then(inner)
    if isinstance(dtype, pl.List):
        return expr.list.eval(_writable(pl.element(), dtype.inner))
    return expr


def _as_written(schema, dtype: pl.DataType):
    """The Avro schema polars gives the writable form of a value of `dtype`, made the value's own: each list
    of entries an Avro map, each UTC timestamp `timestamp-micros` (polars says `local-timestamp-micros`, a
    wall-clock time in no zone, of every timestamp it writes)."""
    if isinstance(schema, list):  # polars makes every value nullable: ["null", the type]
        return [s if s == "null" else _as_written(s, dtype) for s in schema]
    if isinstance(dtype, pl.Map):
        items = schema["items"]
        [entry] = [s for s in items if s != "null"] if isinstance(items, list) else [items]
        [value] = [f["type"] for f in entry["fields"] if f["name"] == "value"]
        return {"type": "map", "values": _as_written(value, dtype.value)}
    if isinstance(dtype, pl.Datetime) and dtype.time_zone:
        return {**schema, "logicalType": "timestamp-micros"}
    if isinstance(dtype, pl.Struct):
        return {
            **schema,
            "fields": [{**f, "type": _as_written(f["type"], d.dtype)} for f, d in zip(schema["fields"], dtype.fields)],
        }
    if isinstance(dtype, pl.List):
        return {**schema, "items": _as_written(schema["items"], dtype.inner)}
    return schema


def _as_entries(schema, names: Iterator[int]):
    """`schema` with each map an array of records (`key`: string, `value`): the same bytes, which polars reads."""
    if isinstance(schema, list):
        return [_as_entries(s, names) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "map":
        return {
            "type": "array",
            "items": {
                "type": "record",
                "name": f"map_entry_{next(names)}",
                "fields": [
                    {"name": "key", "type": "string"},
                    {"name": "value", "type": _as_entries(schema["values"], names)},
                ],
            },
        }
    if schema.get("type") == "record":
        return {**schema, "fields": [{**f, "type": _as_entries(f["type"], names)} for f in schema["fields"]]}
    if schema.get("type") == "array":
        return {**schema, "items": _as_entries(schema["items"], names)}
    return schema


def read_avro(data: bytes) -> pl.DataFrame:
    """An Avro file's records, each map a list of its entries (`key`, `value`): polars cannot read Avro maps,
    but a map's blocks are encoded exactly as an array of records of a string and a value is."""
    schema = avro_container.schema(data)
    entries = _as_entries(schema, itertools.count(1))
    return pl.read_avro(io.BytesIO(data if entries == schema else avro_container.with_schema(data, entries)))


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
    # One chunk per column: write_avro assumes every column is cut into the same chunks, which a concat of
    # slices need not give (polars panics on such a frame).
    df = pl.concat(frames, rechunk=True)
    name, codec = avro_name(topic), "deflate" if compression == "gzip" else "uncompressed"
    has_map = any(_has_map(t) for t in df.dtypes)
    writable = (df.head(0) if has_map else df).select(_writable(pl.col(c), t).alias(c) for c, t in df.schema.items())
    out = io.BytesIO()
    writable.write_avro(out, compression=codec, name=name)
    written = avro_container.schema(out.getvalue())
    schema = {
        **written,
        "fields": [{**f, "type": _as_written(f["type"], t)} for f, t in zip(written["fields"], df.dtypes)],
    }
    if has_map:  # polars 2.1 cannot write a map ("not yet implemented: write Map to avro"): fastavro does, a
        import fastavro  # record at a time (the cost of a map column: see BENCHMARKS.md)

        out = io.BytesIO()
        fastavro.writer(
            out, fastavro.parse_schema(schema), df.to_dicts(), codec="deflate" if codec == "deflate" else "null"
        )
        return out.getvalue()
    return out.getvalue() if schema == written else avro_container.with_schema(out.getvalue(), schema)


class AvroEncoder:
    def __init__(self, envelope: Envelope, topic: str, compression: str | None = None):
        self.envelope, self.topic, self.compression = envelope, topic, compression

    def encode(self, df: pl.DataFrame) -> tuple[pl.DataFrame, object]:
        rows = avro_frame(with_topic(df, self.envelope, self.topic), self.envelope)
        return rows, row_sizes(rows).to_numpy()

    def file(self, parts: list) -> bytes:
        return avro_bytes(parts, self.topic, self.compression)
