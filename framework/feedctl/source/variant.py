"""VARIANT columns (Delta's `variantType`) read as the JSON text of their values, as Spark's `to_json` writes it.

A VARIANT is stored in Parquet as a struct of two binaries, `metadata` (the dictionary of object keys) and
`value`, in the Variant binary encoding of the Parquet format (`VariantEncoding.md`); a shredded one
(`VariantShredding.md`) also has `typed_value`, the parts of the value written as ordinary Parquet columns,
and its `value` holds only what they do not. No Arrow, polars or delta-rs release decodes it, and DuckDB's
reader, which does, writes SQL NULL for a JSON `null`, binary as `\\x..` escapes and time zones as `+00`:
values a consumer would read differently from the table's own engine. So it is decoded here, value by value
(semi-structured columns are the exception in a table; the cost is a Python call per value).

The text is Spark's: compact, object keys in the order stored (sorted), numbers as Java prints them (`1.0E-5`,
`100.0`), decimals without trailing zeros, dates and timestamps quoted (`2024-01-01 12:00:00.1+00:00`, in UTC),
binary in base64, NaN and infinities as strings.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
import uuid
from decimal import Decimal

import numpy as np
import pyarrow as pa


class VariantError(Exception):
    """A value that is not a well-formed Variant."""


def json_type(delta_type) -> bool:
    """Whether a Delta schema type is a VARIANT."""
    return delta_type == "variant"


def json_schema(schema: pa.Schema, delta_schema: dict) -> pa.Schema:
    """`schema` (as delta-rs gives a table's, a VARIANT as its struct of binaries) with each VARIANT, at any
    depth, a string: the JSON text it is read as."""
    fields = {f["name"]: f["type"] for f in delta_schema.get("fields", [])}
    return pa.schema([_field(f, fields.get(f.name)) for f in schema], metadata=schema.metadata)


def variant_columns(delta_schema: dict) -> tuple[str, ...]:
    """The top-level columns that are VARIANTs."""
    return tuple(f["name"] for f in delta_schema.get("fields", []) if json_type(f["type"]))


def _field(f: pa.Field, delta_type) -> pa.Field:
    return f.with_type(_type(f.type, delta_type))


def _type(t: pa.DataType, delta_type) -> pa.DataType:
    if json_type(delta_type):
        return pa.string()
    if not isinstance(delta_type, dict):
        return t
    kind = delta_type.get("type")
    if kind == "struct" and pa.types.is_struct(t):
        fields = {f["name"]: f["type"] for f in delta_type["fields"]}
        return pa.struct([_field(t.field(i), fields.get(t.field(i).name)) for i in range(t.num_fields)])
    if kind == "array" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return pa.list_(_field(t.value_field, delta_type["elementType"]))
    if kind == "map" and pa.types.is_map(t):
        return pa.map_(t.key_type, _field(t.item_field, delta_type["valueType"]))
    return t


def to_json(array: pa.Array) -> pa.Array:
    """The JSON text of each VARIANT of `array` (a struct of `metadata`, `value` and, shredded,
    `typed_value`); a null struct is null."""
    if not pa.types.is_struct(array.type) or array.type.get_field_index("metadata") < 0:
        raise VariantError(f"a VARIANT is stored as a struct with a metadata field, not as {array.type}")
    metadata = array.field("metadata").to_pylist()
    value = array.field("value").to_pylist() if array.type.get_field_index("value") >= 0 else [None] * len(array)
    typed_type = array.type.field("typed_value").type if array.type.get_field_index("typed_value") >= 0 else None
    typed = array.field("typed_value").to_pylist() if typed_type is not None else [None] * len(array)
    valid = array.is_valid().to_pylist()
    keys_of: dict[bytes, list[str]] = {}  # rows of a file share a few dictionaries
    out = []
    for ok, m, v, t in zip(valid, metadata, value, typed):
        if not ok:
            out.append(None)
            continue
        keys = keys_of.get(m)
        if keys is None:
            keys = keys_of[m] = _dictionary(m)
        if t is None and v is None:
            raise VariantError("a VARIANT with neither value nor typed_value")
        out.append(_shredded(v, t, typed_type, keys))
    return pa.array(out, pa.string())


# -- the binary encoding ---------------------------------------------------------------------------------


def _dictionary(metadata: bytes) -> list[str]:
    if not metadata or metadata[0] & 0x0F != 1:
        raise VariantError(f"metadata of version {metadata[0] & 0x0F if metadata else None}; version 1 is read")
    size = ((metadata[0] >> 6) & 0x03) + 1
    count = _uint(metadata, 1, size)
    offsets = [_uint(metadata, 1 + size * (i + 1), size) for i in range(count + 1)]
    start = 1 + size * (count + 2)
    try:
        return [metadata[start + a : start + b].decode("utf-8") for a, b in zip(offsets, offsets[1:])]
    except UnicodeDecodeError as exc:
        raise VariantError(f"an object key that is not UTF-8: {exc}") from None


def _uint(data: bytes, at: int, size: int) -> int:
    if at + size > len(data):
        raise VariantError(f"{len(data)} bytes end before byte {at + size}")
    return int.from_bytes(data[at : at + size], "little")


def _value(data: bytes, at: int, keys: list[str]) -> str:
    """The JSON text of the value encoded at `data[at:]`."""
    if at >= len(data):
        raise VariantError(f"{len(data)} bytes end before a value at byte {at}")
    header = data[at]
    basic, head = header & 0x03, header >> 2
    if basic == 1:  # a short string, its length in the header
        return _string(data[at + 1 : at + 1 + head])
    if basic == 2:
        return _object(data, at, head, keys)
    if basic == 3:
        return _array(data, at, head, keys)
    return _primitive(data, at + 1, head)


def _object(data: bytes, at: int, head: int, keys: list[str]) -> str:
    return "{" + ",".join(f"{_string_text(k)}:{v}" for k, v in _members(data, at, keys)) + "}"


def _array(data: bytes, at: int, head: int, keys: list[str]) -> str:
    offset_size, large = (head & 0x03) + 1, (head >> 2) & 0x01
    count_size = 4 if large else 1
    count = _uint(data, at + 1, count_size)
    offsets_at = at + 1 + count_size
    values_at = offsets_at + (count + 1) * offset_size
    items = [
        _value(data, values_at + _uint(data, offsets_at + i * offset_size, offset_size), keys) for i in range(count)
    ]
    return "[" + ",".join(items) + "]"


_FIXED = {
    3: "<b",
    4: "<h",
    5: "<i",
    6: "<q",
    7: "<d",
    11: "<i",
    12: "<q",
    13: "<q",
    14: "<f",
    17: "<q",
    18: "<q",
    19: "<q",
}
_DECIMAL = {8: 4, 9: 8, 10: 16}


def _primitive(data: bytes, at: int, type_id: int) -> str:
    if type_id == 0:
        return "null"
    if type_id in (1, 2):
        return "true" if type_id == 1 else "false"
    if type_id in _FIXED:
        code = _FIXED[type_id]
        if at + struct.calcsize(code) > len(data):
            raise VariantError(f"{len(data)} bytes end inside a value of type {type_id}")
        (n,) = struct.unpack_from(code, data, at)
        return _scalar(type_id, n)
    if type_id in _DECIMAL:
        width = _DECIMAL[type_id]
        scale = _uint(data, at, 1)
        unscaled = int.from_bytes(data[at + 1 : at + 1 + width], "little", signed=True)
        return decimal_text(Decimal(f"{unscaled}E-{scale}"))  # exact: arithmetic would round to 28 digits
    if type_id in (15, 16):  # binary, string: a 4-byte length
        size = _uint(data, at, 4)
        raw = data[at + 4 : at + 4 + size]
        return _quoted(base64.b64encode(raw).decode()) if type_id == 15 else _string(raw)
    if type_id == 20:
        return _quoted(str(uuid.UUID(bytes=bytes(data[at : at + 16]))))
    raise VariantError(f"a primitive of type {type_id}, which the Variant encoding does not define")


def _scalar(type_id: int, n) -> str:
    if type_id in (3, 4, 5, 6):
        return str(n)
    if type_id == 7:
        return double_text(n)
    if type_id == 14:
        return float_text(n)
    if type_id == 11:
        return _quoted((_EPOCH_DAY + dt.timedelta(days=n)).isoformat())
    if type_id == 17:
        return _quoted(_time_text(n * 1000))
    return _quoted(timestamp_text(n * (1000 if type_id in (12, 13) else 1), utc=type_id in (12, 18)))


def _string(raw: bytes) -> str:
    try:
        return _string_text(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise VariantError(f"a string that is not UTF-8: {exc}") from None


def _string_text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _quoted(text: str) -> str:
    return f'"{text}"'


# -- Spark's text for numbers and times ------------------------------------------------------------------

_EPOCH_DAY = dt.date(1970, 1, 1)
_SPECIAL = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def double_text(x: float) -> str:
    """As Java's `Double.toString` prints it: the shortest digits that read back, in scientific notation
    below 10^-3 and from 10^7."""
    return _java_number(repr(float(x)))


def float_text(x: float) -> str:
    """As Java's `Float.toString`: the shortest digits that read back as the same 32-bit float."""
    return _java_number(np.format_float_scientific(np.float32(x), unique=True, trim="-"))


def _java_number(shortest: str) -> str:
    if shortest.lower() in _SPECIAL:
        return _SPECIAL[shortest.lower()]
    sign = "-" if shortest.startswith("-") else ""
    digits, exponent = _digits(shortest.lstrip("-"))
    if not digits.strip("0"):
        return f"{sign}0.0"
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction.rstrip('0') or '0'}"
    return f"{sign}{digits[0]}.{digits[1:].rstrip('0') or '0'}E{exponent}"


def _digits(text: str) -> tuple[str, int]:
    """The significant digits of a positive decimal number's text and the exponent of its first digit."""
    mantissa, _, exp = text.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = int(exp or 0) + len(whole) - 1 - (len(whole + fraction) - len((whole + fraction).lstrip("0")))
    return (digits.rstrip("0") or "0"), exponent


def decimal_text(value: Decimal) -> str:
    """Plain digits without trailing zeros after the point, as Spark prints a VARIANT's decimal."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "0") else text


def timestamp_text(nanos: int, utc: bool) -> str:
    """`YYYY-MM-DD HH:MM:SS[.fraction]` with the fraction's trailing zeros dropped, `+00:00` when in UTC."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    m = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d} {m.hour:02d}:{m.minute:02d}:{m.second:02d}{_fraction(fraction)}"
    return text + "+00:00" if utc else text


def _time_text(nanos: int) -> str:
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{_fraction(fraction)}"


def _fraction(nanos: int) -> str:
    return f".{nanos:09d}".rstrip("0") if nanos else ""


# -- shredded values -------------------------------------------------------------------------------------


def _shredded(value: bytes | None, typed, typed_type: pa.DataType | None, keys: list[str]) -> str:
    """The JSON text of a value shredded into `value` (the Variant encoding of what is not typed) and
    `typed` (a Python value of Arrow type `typed_type`)."""
    if typed is None:
        if value is None:
            return "null"  # a value missing from an object was handled by its caller
        return _value(value, 0, keys)
    if pa.types.is_struct(typed_type):
        members = {}
        for i in range(typed_type.num_fields):
            f = typed_type.field(i)
            part = typed.get(f.name) or {}
            inner = f.type.field("typed_value").type if f.type.get_field_index("typed_value") >= 0 else None
            if part.get("value") is None and part.get("typed_value") is None:
                continue  # not in this object
            members[f.name] = _shredded(part.get("value"), part.get("typed_value"), inner, keys)
        if value is not None:  # a partly shredded object: the fields not shredded
            if value[0] & 0x03 != 2:
                raise VariantError("a partly shredded object whose other fields are not an object")
            for name, text in _members(value, 0, keys):
                if name in members:
                    raise VariantError(f"an object field {name!r} both shredded and not")
                members[name] = text
        return "{" + ",".join(f"{_string_text(k)}:{members[k]}" for k in sorted(members)) + "}"
    if value is not None:
        raise VariantError(f"a value both shredded as {typed_type} and not")
    if pa.types.is_list(typed_type) or pa.types.is_large_list(typed_type):
        element = typed_type.value_type
        inner = element.field("typed_value").type if element.get_field_index("typed_value") >= 0 else None
        items = []
        for each in typed:
            if each is None or (each.get("value") is None and each.get("typed_value") is None):
                raise VariantError("an array element with neither value nor typed_value")
            items.append(_shredded(each.get("value"), each.get("typed_value"), inner, keys))
        return "[" + ",".join(items) + "]"
    return _typed_scalar(typed, typed_type)


def _members(data: bytes, at: int, keys: list[str]) -> list[tuple[str, str]]:
    """The (key, JSON text) of each field of the object encoded at `data[at:]`, in the order stored."""
    head = data[at] >> 2
    offset_size, id_size, large = (head & 0x03) + 1, ((head >> 2) & 0x03) + 1, (head >> 4) & 0x01
    count_size = 4 if large else 1
    count = _uint(data, at + 1, count_size)
    ids_at = at + 1 + count_size
    offsets_at = ids_at + count * id_size
    values_at = offsets_at + (count + 1) * offset_size
    members = []
    for i in range(count):
        key = _uint(data, ids_at + i * id_size, id_size)
        if key >= len(keys):
            raise VariantError(f"an object key id {key} past the metadata's {len(keys)} keys")
        members.append(
            (keys[key], _value(data, values_at + _uint(data, offsets_at + i * offset_size, offset_size), keys))
        )
    return members


def _typed_scalar(x, t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "true" if x else "false"
    if pa.types.is_integer(t):
        return str(x)
    if pa.types.is_float32(t):
        return float_text(x)
    if pa.types.is_floating(t):
        return double_text(x)
    if pa.types.is_decimal(t):
        return decimal_text(x)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _string_text(x)
    if pa.types.is_date(t):
        return _quoted(x.isoformat())
    if pa.types.is_timestamp(t):
        nanos = pa.scalar(x, t).cast(pa.int64()).as_py() * (1 if t.unit == "ns" else 1000)
        return _quoted(timestamp_text(nanos, utc=t.tz is not None))
    if pa.types.is_time(t):
        return _quoted(_time_text(pa.scalar(x, t).cast(pa.int64()).as_py() * (1 if t.unit == "ns" else 1000)))
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return _quoted(str(uuid.UUID(bytes=x)))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _quoted(base64.b64encode(x).decode())
    raise VariantError(f"a shredded value of type {t}, which the Variant shredding does not define")
