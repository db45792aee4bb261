"""Turn a feed's compiled CDC query into the Spark SQL that runs over one batch's change view.

The user's projection becomes the struct `__after` (null for deletes), its WHERE stays as written, and the
hidden columns the encoder and the sink need ride along. `event_op()` reads the change's op;
`changefeed_creation_timestamp()` and `event_schema_timestamp()` are the job's start time (no schema
change is replayed yet). With `diff`, the projection is applied to the previous row too (`__before`), so a
query that leaves a column out never leaks it through `before`.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from feedctl import frame
from feedctl.compiler.cdc_query import DIALECT, PREV
from feedctl.compiler.query_names import table_qualifiers, unqualified

HIDDEN = (frame.KEY, frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, frame.MVCC_WALL, frame.OP)


def _hlc_decimal(text: str) -> exp.Expression:
    return sqlglot.parse_one(f"CAST('{text}' AS DECIMAL(38, 10))", read=DIALECT)


def replace_functions(node: exp.Expression, start_hlc: str) -> exp.Expression:
    def swap(n):
        if isinstance(n, exp.Anonymous):
            name = str(n.name).lower()
            if name == "event_op":
                return exp.column(frame.OP)
            if name in ("changefeed_creation_timestamp", "event_schema_timestamp"):
                return _hlc_decimal(start_hlc)
        return n

    return node.transform(swap)


def _as_previous(node: exp.Expression) -> exp.Expression:
    """The same expression over the previous row: `c` → `cdc_prev.c`; the previous row's own previous
    row is unknown, so `cdc_prev.c` → NULL. Columns are unqualified already."""

    def swap(n):
        if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
            parts = [p.name for p in n.parts]
            if parts[0] == PREV:
                return exp.Null()
            if parts[0].startswith("__"):
                return n
            # `c` → `cdc_prev`.`c`; a struct field `ext.color` → `cdc_prev`.`ext`.`color`
            return sqlglot.parse_one(".".join(f"`{p}`" for p in [PREV, *parts]), read=DIALECT)
        return n

    return node.transform(swap)


def projection(select: exp.Select, columns: list[str]) -> list[tuple[str, exp.Expression]]:
    """(output name, expression) for each projected item, `*` expanded to the table's columns."""
    out = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star) and item.table != PREV
        ):
            out.extend((c, exp.column(c)) for c in columns)
        elif isinstance(item, exp.Alias):
            out.append((item.alias, item.this))
        elif isinstance(item, exp.Column):
            out.append((item.name, item))
        else:
            out.append((item.sql(dialect=DIALECT), item))
    return out


def json_outputs(compiled_sql: str | None, columns: list[str], json_columns: tuple[str, ...]) -> tuple[str, ...]:
    """The query's output columns that are one of the table's `json_columns` (VARIANTs, read as JSON text)
    passed through as they are (`*`, `v`, `v AS w`): only those are written as JSON; what a query computes
    from one is whatever it computes (`get_json_object(v, '$.a')` a string)."""
    if not json_columns:
        return ()
    if compiled_sql is None:
        return tuple(c for c in columns if c in json_columns)
    select = sqlglot.parse_one(compiled_sql, read=DIALECT)
    while isinstance(select, exp.Subquery):
        select = select.this
    select = unqualified(select.copy(), table_qualifiers(select))
    wanted = {c.lower() for c in json_columns}
    return tuple(
        name
        for name, expr in projection(select, columns)
        if isinstance(expr, exp.Column) and not expr.table and expr.name.lower() in wanted
    )


def _named_struct(pairs: list[tuple[str, exp.Expression]]) -> exp.Expression:
    args = []
    for name, expr in pairs:
        args.extend([exp.Literal.string(name), expr])
    return exp.Anonymous(this="named_struct", expressions=args)


def spark_sql(
    compiled_sql: str | None, table_fqn: str, columns: list[str], view: str, start_hlc: str, diff: bool
) -> str:
    """The batch query for one table. Without a CDC query, every column of every change."""
    select = sqlglot.parse_one(compiled_sql or f"SELECT * FROM {table_fqn}", read=DIALECT)
    while isinstance(select, exp.Subquery):
        select = select.this
    select = unqualified(replace_functions(select.copy(), start_hlc), table_qualifiers(select))
    table = select.args["from_"].this
    pairs = projection(select, columns)
    after = exp.Case(
        ifs=[exp.If(this=sqlglot.parse_one(f"{frame.OP} = 'delete'", read=DIALECT), true=exp.Null())],
        default=_named_struct(pairs),
    )
    items = [exp.alias_(after, frame.AFTER)]
    if diff:
        prev_pairs = [(name, _as_previous(expr.copy())) for name, expr in pairs]
        before = exp.Case(
            ifs=[exp.If(this=exp.column(PREV).is_(exp.Null()), true=exp.Null())], default=_named_struct(prev_pairs)
        )
        items.append(exp.alias_(before, frame.BEFORE))
    items.extend(exp.column(h) for h in (*HIDDEN, frame.ERROR))
    new_from = exp.Table(this=exp.to_identifier(view), alias=table.args.get("alias"))
    select.set("expressions", items)
    where = select.args.get("where")
    if where is not None:  # the row of an error reaches the writer whatever the query keeps
        failed = exp.column(frame.ERROR).is_(exp.Null()).not_()
        select.set("where", exp.Where(this=exp.or_(exp.paren(where.this), failed)))
    select.set("from_", exp.From(this=new_from))
    return select.sql(dialect=DIALECT)
