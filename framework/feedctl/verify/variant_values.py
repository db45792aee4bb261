"""The second reader's VARIANT decoding, written apart from `source/variant.py` so that a decoding bug there
shows as a difference here: a stored value (`metadata`, `value`, shredded `typed_value`, as pyarrow gives
them for one row) becomes a Python value first (dicts, lists, numbers, and Spark's strings for dates,
times and binary), then its JSON text as Spark writes it."""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
import uuid
from decimal import Context, Decimal

import numpy as np
import pyarrow as pa


class BadVariant(ValueError):
    """A stored VARIANT that does not follow the encoding."""


def json_text(stored: dict | None, typed_type: pa.DataType | None = None) -> str | None:
    """The JSON text of one stored VARIANT (None: a null column value); `typed_type`: the Arrow type of its
    `typed_value`, when shredded (a float's digits are a 32-bit float's)."""
    if stored is None:
        return None
    keys = _keys(stored["metadata"])
    return _text(_unshred(stored.get("value"), stored.get("typed_value"), typed_type, keys))


def _text(value) -> str:
    """JSON text as Spark writes it: compact, numbers as Java prints them, decimals with every digit."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java(value)
    if isinstance(value, Decimal):
        plain = f"{value:f}"
        plain = plain.rstrip("0").rstrip(".") if "." in plain else plain
        return "0" if plain in ("-0", "0") else plain
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _text(v) for k, v in value.items()) + "}"


def _java(x: float) -> str:
    """Java's `Double.toString`: positional from 10^-3 up to 10^7, else `d.dddE<n>`; always a point."""
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    mantissa, exponent = np.format_float_scientific(x, unique=True, trim="0").split("e")
    if -3 <= int(exponent) < 7:
        positional = np.format_float_positional(x, unique=True, trim="0")
        return positional if "." in positional else positional + ".0"
    return f"{mantissa}E{int(exponent)}"


def typed_type(stored: pa.DataType) -> pa.DataType | None:
    """The type of a stored VARIANT's `typed_value`, or None when it is not shredded."""
    index = stored.get_field_index("typed_value") if pa.types.is_struct(stored) else -1
    return stored.field(index).type if index >= 0 else None


def _keys(metadata: bytes) -> list[str]:
    header = metadata[0]
    if header & 0b1111 != 1:
        raise BadVariant(f"metadata version {header & 0b1111}")
    width = (header >> 6) + 1
    fields = [int.from_bytes(metadata[i : i + width], "little") for i in range(1, len(metadata) - width + 1, width)]
    count = fields[0]
    offsets = fields[1 : count + 2]
    base = 1 + width * (count + 2)
    return [metadata[base + offsets[i] : base + offsets[i + 1]].decode() for i in range(count)]


_MISSING = object()
_EXACT = Context(prec=80)  # a decimal's 38 digits kept


def _unshred(value: bytes | None, typed, type_: pa.DataType | None, keys: list[str]):
    if typed is None:
        return _MISSING if value is None else _decode(memoryview(value), keys)
    if isinstance(typed, dict):  # an object's shredded fields; `value`, any others
        out = {
            k: _unshred((p or {}).get("value"), (p or {}).get("typed_value"), typed_type(type_.field(k).type), keys)
            for k, p in typed.items()
        }
        out = {k: v for k, v in out.items() if v is not _MISSING}
        if value is not None:
            rest = _decode(memoryview(value), keys)
            if not isinstance(rest, dict) or set(rest) & set(out):
                raise BadVariant("a partly shredded object's other fields")
            out.update(rest)
        return dict(sorted(out.items()))
    if isinstance(typed, list):
        element = typed_type(type_.value_type)
        return [_unshred(e.get("value"), e.get("typed_value"), element, keys) for e in typed]
    return _plain(float(str(np.float32(typed))) if pa.types.is_float32(type_) else typed)


def _plain(x):
    """A shredded scalar as the value it stands for."""
    if isinstance(x, bytes):
        return base64.b64encode(x).decode()
    if isinstance(x, dt.datetime):
        return _moment(x.replace(tzinfo=None), x.tzinfo is not None)
    if isinstance(x, dt.date):
        return x.isoformat()
    if isinstance(x, dt.time):
        return _clock(x.hour * 3600 + x.minute * 60 + x.second, x.microsecond * 1000)
    return x


def _clock(seconds: int, nanos: int) -> str:
    """`HH:MM:SS` and the fraction's digits up to its last one that is not zero."""
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{fraction}"


def _moment(naive: dt.datetime, utc: bool, nanos: int | None = None) -> str:
    day = f"{naive.year:04d}-{naive.month:02d}-{naive.day:02d}"
    nanos = naive.microsecond * 1000 if nanos is None else nanos
    clock = _clock(naive.hour * 3600 + naive.minute * 60 + naive.second, nanos)
    return f"{day} {clock}" + ("+00:00" if utc else "")


_EPOCH = dt.datetime(1970, 1, 1)


def _decode(v: memoryview, keys: list[str]):
    kind, info = v[0] & 3, v[0] >> 2
    if kind == 1:
        return bytes(v[1 : 1 + info]).decode()
    if kind in (2, 3):
        size = (info & 3) + 1
        if kind == 2:
            id_size, large = ((info >> 2) & 3) + 1, info & 0b10000
        else:
            id_size, large = 0, info & 0b100
        n_size = 4 if large else 1
        n = int.from_bytes(v[1 : 1 + n_size], "little")
        at = 1 + n_size
        ids = [int.from_bytes(v[at + i * id_size : at + (i + 1) * id_size], "little") for i in range(n)]
        at += n * id_size
        offsets = [int.from_bytes(v[at + i * size : at + (i + 1) * size], "little") for i in range(n + 1)]
        start = at + (n + 1) * size
        items = [_decode(v[start + o :], keys) for o in offsets[:-1]]
        return dict(zip((keys[i] for i in ids), items)) if kind == 2 else items
    body = v[1:]
    simple = {0: None, 1: True, 2: False}
    if info in simple:
        return simple[info]
    formats = {3: "b", 4: "h", 5: "i", 6: "q", 7: "d", 14: "f"}
    if info in formats:
        (x,) = struct.unpack("<" + formats[info], body[: struct.calcsize(formats[info])])
        if info == 14:  # Spark prints a 32-bit float's own shortest digits
            x = float(str(np.float32(x)))
        if isinstance(x, float) and x != x:
            return "NaN"
        if isinstance(x, float) and abs(x) == float("inf"):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    if info in (8, 9, 10):
        width = {8: 4, 9: 8, 10: 16}[info]
        return Decimal(int.from_bytes(body[1 : 1 + width], "little", signed=True)).scaleb(-body[0], _EXACT)
    (n,) = struct.unpack("<q", body[:8]) if info in (12, 13, 17, 18, 19) else (0,)
    if info == 11:
        return (dt.date(1970, 1, 1) + dt.timedelta(days=int.from_bytes(body[:4], "little", signed=True))).isoformat()
    if info in (12, 13):
        return _moment(_EPOCH + dt.timedelta(microseconds=n), info == 12)
    if info in (18, 19):
        return _moment(_EPOCH + dt.timedelta(seconds=n // 10**9), info == 18, n % 10**9)
    if info == 17:
        return _clock(n // 10**6, n % 10**6 * 1000)
    if info in (15, 16):
        size = int.from_bytes(body[:4], "little")
        raw = bytes(body[4 : 4 + size])
        return base64.b64encode(raw).decode() if info == 15 else raw.decode()
    if info == 20:
        return str(uuid.UUID(bytes=bytes(body[:16])))
    raise BadVariant(f"primitive type {info}")
