"""JSON messages, built column by column with polars: no Python object per row.

Type mapping (documented in the manual's docs/guides/formats-and-envelopes.md): integers and floats are JSON
numbers (NaN and infinities null);
decimals are strings with every digit (`"12.50"`); timestamps with a time zone are RFC 3339 in UTC with `Z`
and as many fraction digits as needed (0, 3, 6 or 9); timestamps without one print the same without `Z`;
dates `YYYY-MM-DD`; binary is base64; structs are objects and lists arrays, formatted the same way inside;
maps are objects whose keys are the string form of the map's keys (a number's digits, a timestamp as above,
a struct's or list's JSON text), as Spark's `to_json` writes them; a VARIANT (its JSON text) is the JSON it
holds. Object keys are sorted, as CockroachDB's JSON is.
"""

from __future__ import annotations

import json

import polars as pl

from feedctl import frame
from feedctl.encoding.buffers import Lines
from feedctl.encoding.compression import compress
from feedctl.encoding.envelope import Envelope


def _formatted(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """`expr` with every value turned into what its JSON should hold."""
    if isinstance(dtype, pl.Decimal):
        return expr.cast(pl.String)
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone:
            return expr.dt.convert_time_zone("UTC").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ")
        return expr.dt.strftime("%Y-%m-%dT%H:%M:%S%.f")
    if isinstance(dtype, pl.Date):
        return expr.dt.strftime("%Y-%m-%d")
    if isinstance(dtype, pl.Time):
        return expr.dt.strftime("%H:%M:%S%.f")
    if isinstance(dtype, pl.Duration):
        return expr.dt.total_microseconds()
    if isinstance(dtype, pl.Binary):
        return expr.bin.encode("base64")
    if isinstance(dtype, (pl.Float32, pl.Float64)):
        return pl.when(expr.is_finite()).then(expr)
    if isinstance(dtype, pl.Struct):
        fields = sorted(dtype.fields, key=lambda f: f.name)
        inner = pl.struct([_formatted(expr.struct.field(f.name), f.dtype).alias(f.name) for f in fields])
        return pl.when(expr.is_not_null()).then(inner)
    if isinstance(dtype, (pl.List, pl.Array)):
        inner = dtype.inner
        if _needs_format(inner):
            return expr.list.eval(_formatted(pl.element(), inner))
        return expr
    if isinstance(dtype, pl.Map):
        entry = pl.element()
        key = map_key_text(entry.struct.field("key"), dtype.key)
        value = _formatted(entry.struct.field("value"), dtype.value)
        return expr.map.entries().list.eval(pl.struct(key.alias("key"), value.alias("value"))).list.to_map()
    return expr


def _text(formatted: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A formatted value as the text a JSON object key holds."""
    if dtype == pl.String or isinstance(dtype, (pl.Decimal, pl.Datetime, pl.Date, pl.Time, pl.Binary)):
        return formatted.cast(pl.String)
    if dtype.is_numeric() or dtype == pl.Boolean:
        return formatted.cast(pl.String).fill_null("null")  # NaN and infinities are null, as values are
    return _json_text(formatted)


def map_key_text(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A map's keys (of `dtype`) as the text a JSON object's keys hold: what Avro's string-keyed maps hold too."""
    return _text(_formatted(expr, dtype), dtype)


def _json_text(formatted: pl.Expr) -> pl.Expr:
    return pl.struct(formatted.alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")


def value_json(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """The JSON text of each value of `expr` (of `dtype`), formatted as in messages."""
    return _json_text(_formatted(expr, dtype))


def _needs_format(dtype: pl.DataType) -> bool:
    if isinstance(dtype, (pl.Struct, pl.Map)):
        return True
    if isinstance(dtype, (pl.List, pl.Array)):
        return _needs_format(dtype.inner)
    return isinstance(
        dtype, (pl.Decimal, pl.Datetime, pl.Date, pl.Time, pl.Duration, pl.Binary, pl.Float32, pl.Float64)
    )


def object_json(df: pl.DataFrame, column: str, json_columns: tuple[str, ...] = ()) -> pl.Expr:
    """A struct column as JSON objects with sorted keys; a null struct is `null`. Its fields named in
    `json_columns` hold JSON text (a VARIANT's), written as the JSON it is rather than as a string."""
    dtype = df.schema[column]
    texts = [f.name for f in dtype.fields if f.name in json_columns and f.dtype == pl.String]
    if not texts:
        return _formatted(pl.col(column), dtype).struct.json_encode().fill_null("null")
    parts = []
    for f in sorted(dtype.fields, key=lambda f: f.name):
        field = pl.col(column).struct.field(f.name)
        text = field.fill_null("null") if f.name in texts else value_json(field, f.dtype)
        parts.extend([pl.lit(("," if parts else "{") + json.dumps(f.name) + ":"), text])
    return pl.when(pl.col(column).is_not_null()).then(pl.concat_str([*parts, pl.lit("}")])).otherwise(pl.lit("null"))


def key_json(df: pl.DataFrame) -> pl.Expr:
    """The primary key as a JSON array, in key order: `["seattle", "68ee1f95-..."]`."""
    key = df[frame.KEY]
    parts = [
        _value_json(pl.col(frame.KEY).struct.field(f.name), f.dtype, key.struct.field(f.name)) for f in key.dtype.fields
    ]
    return pl.concat_str([pl.lit("["), pl.concat_str(parts, separator=","), pl.lit("]")])


# What a JSON string escapes: the quote, the backslash and control characters.
_ESCAPED = r'["\\\x00-\x1f]'


def _value_json(expr: pl.Expr, dtype: pl.DataType, values: pl.Series) -> pl.Expr:
    """The JSON text of each of `values` (`expr`). An integer's is its digits, and a string that needs no
    escape is itself in quotes: written directly they cost a fraction of a JSON encoder, with the same text."""
    if dtype.is_integer():
        return expr.cast(pl.String).fill_null("null")
    if dtype == pl.String and not values.str.contains(_ESCAPED).any():
        return pl.concat_str([pl.lit('"'), expr, pl.lit('"')]).fill_null("null")
    one = pl.struct(_formatted(expr, dtype).alias("v"))
    return one.struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")


def hlc_text(wall: str, logical: str | None = None) -> pl.Expr:
    """`"<nanoseconds>.<10-digit logical>"`, as CockroachDB prints an HLC timestamp."""
    tail = pl.col(logical).cast(pl.String).str.zfill(10) if logical else pl.lit("0000000000")
    return pl.concat_str([pl.col(wall).cast(pl.String), pl.lit("."), tail])


def _quoted(expr: pl.Expr) -> pl.Expr:
    return pl.concat_str([pl.lit('"'), expr, pl.lit('"')])


def encode_values(df: pl.DataFrame, envelope: Envelope, end: str = "") -> pl.Series:
    """One JSON message value per row (for key_only, the key), in the frame's order, each followed by `end`
    (a file's line break costs no pass of its own)."""
    meta = []  # (name, expression of its JSON text), in sorted name order
    if envelope.key_in_value or envelope.kind == "bare":
        meta.append(("key", key_json(df)))
    if envelope.mvcc_timestamp:
        meta.append(("mvcc_timestamp", _quoted(hlc_text(frame.MVCC_WALL))))
    if envelope.topic_in_value:
        topic = pl.struct(pl.col(frame.TOPIC).alias("v")).struct.json_encode().str.strip_prefix('{"v":')
        meta.append(("topic", topic.str.strip_suffix("}")))
    if envelope.updated:
        meta.append(("updated", _quoted(hlc_text(frame.TS_WALL, frame.TS_LOGICAL))))

    def members(pairs):
        out = []
        for name, text in pairs:
            out.extend([pl.lit(("," if out else "") + f'"{name}":'), text])
        return out

    def ended(expr: pl.Expr) -> pl.Expr:
        return pl.concat_str([expr, pl.lit(end)]) if end else expr

    if envelope.kind == "key_only":  # the key is the whole message (a Kafka sink sends it as the key)
        expr = ended(key_json(df))
    elif envelope.kind == "row":
        expr = ended(object_json(df, frame.AFTER, envelope.json_columns))
    elif envelope.kind == "bare":
        row = object_json(df, frame.AFTER, envelope.json_columns)
        inner = [pl.lit('{"__crdb__":{'), *members(meta), pl.lit("}")]
        # Row columns follow `__crdb__` at the top level; a delete has none.
        expr = (
            pl.when((row == "null") | (row == "{}"))
            .then(pl.concat_str([*inner, pl.lit("}" + end)]))
            .otherwise(pl.concat_str([*inner, pl.lit(","), row.str.slice(1), pl.lit(end)]))
        )
    else:
        pairs = [("after", object_json(df, frame.AFTER, envelope.json_columns))]
        if envelope.diff:
            pairs.append(("before", object_json(df, frame.BEFORE, envelope.json_columns)))
        expr = pl.concat_str([pl.lit("{"), *members(pairs + meta), pl.lit("}" + end)])
    return df.select(expr.alias(frame.VALUE)).to_series()


def resolved_message(resolved: str, envelope: str) -> str:
    """`{"resolved":"..."}` for wrapped (and enriched), `{"__crdb__":{"resolved":"..."}}` otherwise."""
    if envelope in ("wrapped", "enriched"):
        return '{"resolved":"' + resolved + '"}'
    return '{"__crdb__":{"resolved":"' + resolved + '"}}'


def with_topic(df: pl.DataFrame, envelope: Envelope, topic: str) -> pl.DataFrame:
    """The messages with their topic as a column, when the value carries it (one topic per table)."""
    if envelope.topic_in_value:
        df = df.with_columns(pl.lit(topic, pl.String).alias(frame.TOPIC))
    return df


class JsonEncoder:
    """Newline-delimited JSON files (`.ndjson`, compressed whole with `compression`), and the message values
    of sinks without files."""

    def __init__(self, envelope: Envelope, topic: str, compression: str | None = None):
        self.envelope, self.topic, self.compression = envelope, topic, compression

    def values(self, df: pl.DataFrame) -> pl.Series:
        """One message value per row."""
        return encode_values(with_topic(df, self.envelope, self.topic), self.envelope)

    def encode(self, df: pl.DataFrame) -> tuple[Lines, object]:
        """Each message's line, laid out once in one buffer, and each line's size."""
        lines = Lines(encode_values(with_topic(df, self.envelope, self.topic), self.envelope, end="\n"))
        return lines, lines.sizes()

    def file(self, parts: list) -> bytes:
        return compress(b"".join(parts), self.compression)
