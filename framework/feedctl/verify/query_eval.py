"""A feed's CDC query evaluated by DuckDB over the changes of a table's history.

The query's projection gives `after` (null for a delete) over rows that pass its WHERE; with `diff`, the same
projection over the previous row gives `before`, with `cdc_prev` of that row unknown (null), as the
Spark tasks do.
"""

from __future__ import annotations

import duckdb
import polars as pl
import sqlglot
from sqlglot import exp

from feedctl import frame
from feedctl.compiler.cdc_query import DIALECT, PREV
from feedctl.compiler.query_names import table_qualifiers, unqualified
from feedctl.tasks.query import projection, replace_functions
from feedctl.units import Hlc

ROW_ID = "__rowid"


class QueryError(Exception):
    """The query cannot be evaluated outside Spark (a function DuckDB does not have, say)."""


def _duckdb_sql(sql: str, columns: list[str], view: str, start: Hlc, keep_where: bool) -> tuple[str, list[str]]:
    select = sqlglot.parse_one(sql, read=DIALECT)
    while isinstance(select, exp.Subquery):
        select = select.this
    select = unqualified(replace_functions(select.copy(), str(start)), table_qualifiers(select))
    pairs = projection(select, columns)
    items = [exp.alias_(e, f"__c{i}", quoted=True) for i, (_, e) in enumerate(pairs)]
    select.set("expressions", [*items, exp.column(ROW_ID)])
    select.set("from_", exp.From(this=exp.to_table(view)))
    if not keep_where:
        select.set("where", None)
    return select.sql(dialect="duckdb"), [name for name, _ in pairs]


def evaluate(view: pl.DataFrame, sql: str, columns: list[str], start: Hlc) -> pl.DataFrame:
    """`__rowid`, `__after`, `__before` for each row of `view` the query selects."""
    changes = view.select(ROW_ID, *columns, pl.col(frame.BEFORE).alias(PREV), frame.OP)
    # The previous row as a row of its own: its columns, its own previous row unknown.
    before = pl.col(frame.BEFORE)
    previous = view.filter(before.is_not_null()).select(
        ROW_ID,
        *[before.struct.field(c).alias(c) for c in columns],
        pl.lit(None, view.schema[frame.BEFORE]).alias(PREV),
        frame.OP,
    )
    con = duckdb.connect()
    try:
        con.register("__changes", changes.to_arrow())
        con.register("__previous", previous.to_arrow())
        after_sql, names = _duckdb_sql(sql, columns, "__changes", start, keep_where=True)
        before_sql, _ = _duckdb_sql(sql, columns, "__previous", start, keep_where=False)
        after = pl.from_arrow(con.sql(after_sql).to_arrow_table())
        prev = pl.from_arrow(con.sql(before_sql).to_arrow_table())
    except duckdb.Error as exc:
        raise QueryError(f"the CDC query cannot be evaluated outside Spark: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()

    def struct(df: pl.DataFrame) -> pl.Expr:
        return pl.struct([pl.col(f"__c{i}").alias(n) for i, n in enumerate(names)])

    deleted = view.select(ROW_ID, (pl.col(frame.OP) == "delete").alias("__deleted"))
    out = after.join(deleted, on=ROW_ID).select(
        ROW_ID, pl.when(~pl.col("__deleted")).then(struct(after)).alias(frame.AFTER)
    )
    prev = prev.select(ROW_ID, struct(prev).alias(frame.BEFORE))
    return out.join(prev, on=ROW_ID, how="left")
