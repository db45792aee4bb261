"""Partition values as the Delta log serializes them (the protocol's "Partition Value Serialization"), read
into Arrow values of the column's type. A value that does not parse is an error, never a guess.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation

import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1)


class PartitionValueError(ValueError):
    pass


def parse(text: str | None, type_: pa.DataType):
    """The Python value of a serialized partition value of `type_` (None for a null partition)."""
    if text is None or (text == "" and not pa.types.is_string(type_)):
        return None
    try:
        if pa.types.is_string(type_) or pa.types.is_large_string(type_):
            return text
        if pa.types.is_boolean(type_):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if pa.types.is_integer(type_):
            return int(text)
        if pa.types.is_floating(type_):
            return float(text)  # also NaN, Infinity and -Infinity, as the JVM writes them
        if pa.types.is_decimal(type_):
            value = Decimal(text)
            if not value.is_finite():
                raise ValueError(text)
            return value
        if pa.types.is_date(type_):
            return dt.date.fromisoformat(text)
        if pa.types.is_timestamp(type_):
            return microseconds(text)
        if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
            return text.encode("utf-8")
    except (ValueError, InvalidOperation, OverflowError):
        raise PartitionValueError(f"partition value {text!r} is not a {type_}") from None
    raise PartitionValueError(f"partition columns of type {type_} are not read")


def microseconds(text: str) -> int:
    """`1970-01-01 00:00:00[.ffffff]`, or ISO 8601 adjusted to UTC (`1970-01-01T00:00:00.123456Z`), as
    microseconds since the epoch: years 1 to 9999, where nanoseconds would overflow."""
    text = text.strip()
    text = text.removesuffix("Z")
    parsed = dt.datetime.fromisoformat(text.replace("T", " "))
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def column(text: str | None, type_: pa.DataType, rows: int) -> pa.Array:
    """A column of `rows` copies of one partition value."""
    value = parse(text, type_)
    if value is None:
        return pa.nulls(rows, type_)
    try:
        scalar = pa.scalar(value, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        raise PartitionValueError(f"partition value {text!r} does not fit {type_}") from None
    return pa.repeat(scalar, rows)
