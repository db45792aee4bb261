"""The names a CDC query gives the columns of its table: qualified by the table's name or alias, read through
`cdc_prev`, reaching into struct fields. The rules (`cdc_query`), the pushdown and the query's run share them."""

from __future__ import annotations

from sqlglot import exp

from feedctl.frame import PREV


def table_qualifiers(root: exp.Select) -> set[str]:
    """Lower-cased names that qualify a column of the FROM table: `rides`, `movr.rides`, its alias."""
    from_ = root.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table):
        return set()
    table = from_.this
    return {table.name.lower(), table.alias_or_name.lower(), ".".join(p.name for p in table.parts).lower()}


def column_path(col: exp.Column, qualifiers: set[str]) -> tuple[bool, list[str]]:
    """(read through cdc_prev, the column and any struct fields): `r.ext.color` -> (False, [ext, color])."""
    parts = [p.name for p in col.parts]
    if parts[0].lower() == PREV:
        return True, parts[1:]
    for n in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:n]).lower() in qualifiers:
            return False, parts[n:]
    return False, parts


def unqualified(node: exp.Expression, qualifiers: set[str]) -> exp.Expression:
    """A copy with the table's name or alias dropped from its columns; struct fields and cdc_prev stay."""

    def strip(n):
        if isinstance(n, exp.Column) and n.table:
            prev, parts = column_path(n, qualifiers)
            if not prev and len(parts) < len(n.parts):
                ids = [i.copy() for i in n.parts[len(n.parts) - len(parts) :]]
                return exp.column(ids[-1], *reversed(ids[:-1]))
        return n

    return node.copy().transform(strip)
