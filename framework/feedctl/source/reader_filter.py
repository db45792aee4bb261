"""A pushed-down condition (`compiler.pushdown`'s reader form: comparisons of columns and literals with
AND, OR, NOT, IN, BETWEEN and IS NULL) as the reader applies it: an Arrow expression over the rows, and a
test of whether a data file may hold a row it keeps, by the file's partition values and statistics.

Pushdown only saves work (the query drops the rows anyway), so a condition this module cannot evaluate,
or a literal that does not convert to its column's type, is simply not pushed down.
"""

from __future__ import annotations

import datetime as dt
import json
import operator
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from feedctl.source import partition_value

_OPS = {
    "EQ": operator.eq,
    "NEQ": operator.ne,
    "GT": operator.gt,
    "GTE": operator.ge,
    "LT": operator.lt,
    "LTE": operator.le,
}
_FLIPPED = {"EQ": "EQ", "NEQ": "NEQ", "GT": "LT", "GTE": "LTE", "LT": "GT", "LTE": "GTE"}


class Unsupported(Exception):
    pass


def parse(text: str | None):
    """The condition as a tree of tuples, or None when there is none or it cannot be evaluated here."""
    if not text:
        return None
    from sqlglot import (  # only where a condition is pushed down: tasks import this module
        exp,
        parse_one,
    )

    def node(e):
        if isinstance(e, exp.Paren):
            return node(e.this)
        if isinstance(e, (exp.And, exp.Or)):
            return ("and" if isinstance(e, exp.And) else "or", node(e.left), node(e.right))
        if isinstance(e, exp.Not):
            return ("not", node(e.this))
        if type(e).__name__ in _OPS:
            return ("cmp", type(e).__name__, operand(e.this), operand(e.expression))
        if isinstance(e, exp.In) and not e.args.get("query") and not e.args.get("unnest"):
            return ("in", operand(e.this), [operand(v) for v in e.expressions])
        if isinstance(e, exp.Between):
            return (
                "and",
                ("cmp", "GTE", operand(e.this), operand(e.args["low"])),
                ("cmp", "LTE", operand(e.this), operand(e.args["high"])),
            )
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
            return ("null", operand(e.this))
        raise Unsupported(e.sql())

    def operand(e):
        if isinstance(e, exp.Paren):
            return operand(e.this)
        if isinstance(e, exp.Column) and len(e.parts) == 1:
            return ("col", e.name)
        if isinstance(e, exp.Null):
            return ("lit", None)
        if isinstance(e, exp.Boolean):
            return ("lit", e.this)
        if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
            return ("lit", -_number(e.this.this))
        if isinstance(e, exp.Literal):
            return ("lit", e.this if e.is_string else _number(e.this))
        raise Unsupported(e.sql())

    try:
        return node(parse_one(text, dialect="spark"))
    except Exception:  # sqlglot's errors, or a shape this module does not evaluate
        return None


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        return Decimal(text)


def _scalar(value, type_: pa.DataType) -> pa.Scalar:
    if value is None:
        return pa.scalar(None, type_)
    try:
        if isinstance(value, str) and pa.types.is_timestamp(type_):  # naive text is UTC, as Spark's session
            return pa.scalar(partition_value.microseconds(value), type_)
        return pa.scalar(value).cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError, ValueError):
        raise Unsupported(f"{value!r} as {type_}") from None


def expression(tree, schema: pa.Schema) -> pc.Expression | None:
    """The condition over rows of `schema`, or None when it cannot be evaluated on them."""
    if tree is None:
        return None

    def typed(a, b):
        def one(x, other):
            if x[0] == "col":
                if x[1] not in schema.names:
                    raise Unsupported(x[1])
                return pc.field(x[1])
            if other[0] == "col" and other[1] in schema.names:
                return pc.scalar(_scalar(x[1], schema.field(other[1]).type))
            return pc.scalar(x[1])

        return one(a, b), one(b, a)

    def build(t):
        kind = t[0]
        if kind in ("and", "or"):
            left, right = build(t[1]), build(t[2])
            return left & right if kind == "and" else left | right
        if kind == "not":
            return ~build(t[1])
        if kind == "cmp":
            left, right = typed(t[2], t[3])
            return _OPS[t[1]](left, right)
        if kind == "in":
            if t[1][0] != "col" or t[1][1] not in schema.names or any(v[0] != "lit" for v in t[2]):
                raise Unsupported("IN")
            type_ = schema.field(t[1][1]).type
            values = [v[1] for v in t[2] if v[1] is not None]
            return pc.field(t[1][1]).isin(pa.array([_scalar(v, type_).as_py() for v in values], type_))
        if kind == "null":
            return typed(t[1], t[1])[0].is_null()
        raise Unsupported(kind)

    try:
        return build(tree)
    except Unsupported:
        return None


def may_match(
    tree, schema: pa.Schema, physical: dict[str, str], partition_columns, partition_values: dict, stats: str | None
) -> bool:
    """Whether a file may hold a row the condition keeps: False only when its partition values, or its
    statistics' bounds, rule every row out. `physical`: a column's physical name (what partition values and
    statistics are keyed by)."""
    if tree is None:
        return True
    bounds = _bounds(stats)

    def known(column):
        """(low, high, exact) of a column's values in the file: exact for a partition value (None when
        null), else bounds from the statistics; None when nothing is known."""
        if column not in schema.names:
            return None
        type_ = schema.field(column).type
        name = physical.get(column, column)
        if column in partition_columns:
            value = partition_value.parse(partition_values.get(name), type_)
            value = None if value is None else pa.scalar(value, type_).as_py()
            return value, value, True
        low, high = bounds.get("minValues", {}).get(name), bounds.get("maxValues", {}).get(name)
        if low is None or high is None or isinstance(low, (dict, list)):
            return None
        try:
            return _stat(low, type_, False), _stat(high, type_, True), False
        except (ValueError, Unsupported):
            return None

    def compare(op, column, literal) -> bool:
        found = known(column)
        if found is None:
            return True
        low, high, exact = found
        value = _scalar(literal, schema.field(column).type).as_py()
        if value is None or (exact and low is None):
            return False  # a comparison with NULL is never true
        if isinstance(value, str) and not exact:
            # a string's statistics are cut to a prefix: the largest value starts with at most `high`
            below_high = value[: len(high)] <= high
            return {
                "EQ": low <= value and below_high,
                "NEQ": True,
                "GT": below_high,
                "GTE": below_high,
                "LT": low < value,
                "LTE": low <= value,
            }[op]
        return {
            "EQ": low <= value <= high,
            "NEQ": not (exact and low == value),
            "GT": high > value,
            "GTE": high >= value,
            "LT": low < value,
            "LTE": low <= value,
        }[op]

    def maybe(t) -> bool:  # False: no row of the file makes `t` true
        kind = t[0]
        if kind == "and":
            return maybe(t[1]) and maybe(t[2])
        if kind == "or":
            return maybe(t[1]) or maybe(t[2])
        if kind == "cmp":
            (op, left, right) = t[1:]
            if left[0] == "lit" and right[0] == "col":
                op, left, right = _FLIPPED[op], right, left
            return compare(op, left[1], right[1]) if (left[0], right[0]) == ("col", "lit") else True
        if kind == "in" and t[1][0] == "col" and all(v[0] == "lit" for v in t[2]):
            return any(compare("EQ", t[1][1], v[1]) for v in t[2])
        if kind == "null" and t[1][0] == "col":
            found = known(t[1][1])
            return found is None or not found[2] or found[0] is None
        return True  # NOT, and anything else: not ruled out

    try:
        return maybe(tree)
    except (Unsupported, ValueError, TypeError):  # a value that does not convert rules nothing out
        return True


def _bounds(stats: str | None) -> dict:
    """The statistics of a file. Bounds that are not tight (after deletion vectors) still bound the rows."""
    if not stats:
        return {}
    try:
        found = json.loads(stats)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _stat(value, type_: pa.DataType, upper: bool):
    """A statistic as a Python value comparable with literals; timestamps are kept to milliseconds, so an
    upper bound covers the rest of its millisecond."""
    if pa.types.is_timestamp(type_):
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        if type_.tz is None:
            parsed = parsed.replace(tzinfo=None)
        elif parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return parsed + dt.timedelta(microseconds=999) if upper else parsed
    if pa.types.is_date(type_):
        return dt.date.fromisoformat(str(value))
    if pa.types.is_decimal(type_):
        return Decimal(str(value))
    if pa.types.is_floating(type_) or pa.types.is_boolean(type_) or pa.types.is_binary(type_):
        raise Unsupported(str(type_))  # NaN orders oddly; booleans and binaries are not worth it
    return value
