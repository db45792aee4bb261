"""Statements over many rows, made cheap among a node's hundreds of threads.

Writes: a statement with the values of many rows in it is compiled anew at each execution, for a node's 500 jobs
most of the time of its ticker's round alone. Here the values are parameters, and the rows go in pieces of a
power of two, so that a few shapes (a table, its columns, a number of rows) serve any number of rows.

Reads (`fetch`, and the rows an update wrote, `updated`): on SQLite, every row a statement steps through lets the
interpreter go to another thread, and among busy threads it comes back late. The 2,000 rows a node reads of 500
jobs before emitting took 11 s beside two threads looping in Python; folded by SQLite into one JSON value, they
come in one step, in 0.2 s. Inside a write transaction the store's only write lock is held meanwhile: the
ticker's cut of 500 jobs held it 9.4-10 s beside those two threads, 0.4-1.7 s with its rows fetched so."""

from __future__ import annotations

import json
import re
from collections import Counter, namedtuple
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from sqlalchemy import (
    Float,
    Select,
    String,
    Table,
    Text,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

_ANONYMOUS = re.compile(r"%\(\d+ (\w+)\)s")  # a column SQLAlchemy names as it compiles
PIECE = 128  # rows a statement at most: 1,280 parameters of ten columns, well inside the stores' limits


def pieces(items: list) -> Iterator[list]:
    """`items` in pieces of a power of two, `PIECE` at most: eight shapes of a statement serve any number."""
    start = 0
    while start < len(items):
        size = min(PIECE, 1 << (len(items) - start).bit_length() - 1)
        yield items[start : start + size]
        start += size


def insert_rows(conn: Connection, table: Table, rows: list[dict]) -> None:
    """`rows` (each with the same columns) into `table`."""
    if not rows:
        return
    columns = tuple(rows[0])
    for part in pieces(rows):
        conn.execute(
            _insert_shape(table, columns, len(part)),
            {f"{c}_{i}": row[c] for i, row in enumerate(part) for c in columns},
        )


@cache
def _insert_shape(table: Table, columns: tuple[str, ...], rows: int):
    # Rows selected, not given as VALUES: a statement of many VALUES is compiled anew at each execution.
    each = [select(*[bindparam(f"{c}_{i}", type_=table.c[c].type) for c in columns]) for i in range(rows)]
    return insert(table).from_select(columns, union_all(*each) if rows > 1 else each[0])


def fetch(conn: Connection, statement: Select, parameters: dict | None = None) -> list:
    """The rows of `statement`, in its order, fetched in one step: each with its columns by name, by position and
    in `_mapping`, as SQLAlchemy's rows."""
    if conn.dialect.name != "sqlite":  # psycopg receives a result whole, without letting the interpreter go
        return conn.execute(statement, parameters).all()
    return fold(conn, statement, parameters).rows()


@dataclass(frozen=True)
class Folded:
    """The rows of a statement folded by the store into one JSON text (`fold`): equal texts, equal rows."""

    text: str
    names: tuple[str, ...]
    floats: tuple[int, ...]  # the columns of real numbers, as text of 17 digits (SQLite)

    def rows(self) -> list:
        row = _row_type(self.names)
        out = []
        for fields in json.loads(self.text):
            for i in self.floats:
                if fields[i] is not None:
                    fields[i] = float(fields[i])
            out.append(row(*fields))
        return out


def fold(conn: Connection, statement: Select, parameters: dict | None = None) -> Folded:
    """The rows of `statement`, in its order, as one JSON text the store makes: a look that only needs to know
    whether rows changed since it last read them compares one value, rather than taking each row apart."""
    inner = statement.subquery()
    columns = list(inner.c)
    if conn.dialect.name == "sqlite":
        floats = tuple(i for i, c in enumerate(columns) if isinstance(c.type, Float))
        # SQLite's JSON writes a real number with 15 digits (a time.time() loses its last ones): those go as text
        # of 17, which reads back exactly. An aggregate over a subquery keeps its ORDER BY (SQLite never
        # flattens a subquery with one into an aggregate).
        values = [_exact(c) if i in floats else c for i, c in enumerate(columns)]
        folded = func.json_group_array(func.json_array(*values))
    else:  # PostgreSQL writes a double precision number in the digits that read back exactly
        floats = ()
        folded = func.coalesce(cast(func.json_agg(func.json_build_array(*columns)), Text), "[]")
    text_ = conn.execute(select(folded).select_from(inner), parameters).scalar_one()
    return Folded(text_, _names(columns), floats)


def fetch_of(conn: Connection, statement: Select, column, ids: list) -> list:
    """The rows of `statement` whose `column` is one of `ids`, fetched in one statement (`among`)."""
    return fetch(conn, statement.where(among(conn, column, ids)))


def among(conn: Connection, columns, values: list):
    """`columns IN values` (a column and its values, or a tuple of columns and a tuple of values each), all the
    values of a column in one parameter, a JSON array (on PostgreSQL, one a column). An IN of a parameter a value
    is rendered and parsed anew at each execution, on both sides of the connection: a node's look at 1,000 jobs
    spent 16-18 ms of CPU in each such read, 4.5 ms with the ids as one array; a fence of 333 jobs' leases,
    10 ms against 2.7 ms."""
    single = not isinstance(columns, tuple)
    columns = (columns,) if single else columns
    if conn.dialect.name == "postgresql":
        # Each column's values as one JSON text, which the server takes apart: psycopg dumps a list as an array
        # element by element (2 ms for 1,000 ids, four times in a node's every look at its jobs). Joined with
        # their rows: `= ANY(array)` searched the array row by row, 1,000 values over 3,000 rows slower on the
        # server than the values as parameters.
        elements = [
            cast(
                func.json_array_elements_text(_json([v if single else v[i] for v in values])),
                c.type,
            )
            for i, c in enumerate(columns)
        ]
        return tuple_(*columns).in_(select(*elements))
    each = func.json_each(literal(json.dumps(list(values)), String)).table_valued("value")
    if single:
        return columns[0].in_(select(each.c.value))
    return tuple_(*columns).in_(
        select(*[func.json_extract(each.c.value, literal(f"$[{i}]", String)) for i in range(len(columns))])
    )


def _json(values: list):
    """`values` as one JSON parameter of the statement."""
    return cast(literal(json.dumps(values), Text), postgresql.JSON)


def updated(conn: Connection, table: Table, where, values: dict, keys: tuple) -> list:
    """`values` into the rows of `table` that meet `where`: the `keys` (columns the update leaves as they are)
    of the rows written."""
    statement = update(table).where(where).values(values)
    if conn.dialect.name != "sqlite":
        return conn.execute(statement.returning(*keys)).all()
    # Each row an update returns is a step of its own, letting the interpreter go while this transaction holds
    # the store's only write lock. The rows are read first, in one step: SQLite's write transactions begin
    # holding that lock (`store`), so no other writer changes them in between.
    rows = fetch(conn, select(*keys).where(where))
    if rows:
        conn.execute(statement)
    return rows


def _names(columns) -> tuple[str, ...]:
    """The columns' names as SQLAlchemy's rows have them: one without a name of its own (`func.count()`) is
    called as the compiler labels it, its kind numbered in order (count_1, max_1, max_2)."""
    names, seen = [], Counter()
    for c in columns:
        anonymous = _ANONYMOUS.fullmatch(c.key)
        if anonymous is None:
            names.append(c.key)
        else:
            seen[anonymous[1]] += 1
            names.append(f"{anonymous[1]}_{seen[anonymous[1]]}")
    return tuple(names)


def _exact(column):
    return case((column.is_(None), None), else_=func.printf(literal("%!.17g"), column))


@cache
def _row_type(names: tuple[str, ...]) -> type:
    base = namedtuple("Row", names, rename=True)
    return type("Row", (base,), {"__slots__": (), "_mapping": property(lambda row: dict(zip(names, row)))})
