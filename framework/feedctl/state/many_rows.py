"""Statements over many rows whose shapes are built and compiled once. A statement with the values of many rows in
it is compiled anew at each execution: for a node's 500 jobs, most of the time of its ticker's round alone. Here
the values are parameters, and the rows go in pieces of a power of two, so that a few shapes (a table, its
columns, a number of rows) serve any number of rows."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from sqlalchemy import Table, bindparam, insert, select, union_all
from sqlalchemy.engine import Connection

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
