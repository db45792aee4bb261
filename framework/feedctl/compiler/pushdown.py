"""What a reader can skip: the columns a query needs and its predicates on partition and key columns.

Only top-level AND-ed conditions that name nothing but partition or key columns are pushed down: they hold
for the row before and after a change alike (a key change is a delete plus an insert), so filtering change
rows by them early never drops a change the query would keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from feedctl.compiler.cdc_query import (CDC_FUNCTIONS, DIALECT, QueryAnalysis, _function_name, column_path,
                                        table_qualifiers, unqualified)


@dataclass
class Pushdown:
    columns: list[str] | None  # None: every column
    predicates: list[str] = field(default_factory=list)  # Spark SQL, unqualified column names
    partition_predicates: list[str] = field(default_factory=list)  # the subset on partition columns only

    def to_json(self) -> dict:
        return {"columns": self.columns, "predicates": self.predicates,
                "partition_predicates": self.partition_predicates}


def _conjuncts(node: exp.Expression):
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.left)
        yield from _conjuncts(node.right)
    else:
        yield node


def _column_names(node: exp.Expression, qualifiers: set[str]) -> set[str] | None:
    """Table columns a condition names (a struct field counts as its column), or None when it cannot be
    pushed down."""
    names = set()
    for sub in node.walk():
        if isinstance(sub, exp.Column):
            prev, parts = column_path(sub, qualifiers)
            if prev or isinstance(sub.this, exp.Star):
                return None
            names.add(parts[0])
        elif isinstance(sub, (exp.Select, exp.Subquery)):
            return None
        elif isinstance(sub, exp.Func) and _function_name(sub) in CDC_FUNCTIONS:
            return None
    return names


def derive(analysis: QueryAnalysis | None, all_columns: list[str] | None, key: list[str],
           partition_columns: list[str], extra: list[str] = ()) -> Pushdown:
    """Pushdown for one table. Without a query, every column and no predicate."""
    if analysis is None or analysis.tree is None:
        return Pushdown(columns=None)
    if analysis.star or "*" in analysis.prev_columns:
        columns = None
    else:
        wanted = analysis.columns | analysis.prev_columns | set(key) | set(extra)
        lookup = {c.lower(): c for c in all_columns or []}
        # a name an earlier projection alias also defines is the table column if there is one
        wanted |= {c for c in analysis.alias_refs if c.lower() in lookup}
        ambiguous = all_columns is None and analysis.alias_refs
        columns = None if ambiguous else sorted({lookup.get(c.lower(), c) for c in wanted})
    where = analysis.tree.args.get("where")
    result = Pushdown(columns=columns)
    if where is None:
        return result
    key_set, part_set = {c.lower() for c in key}, {c.lower() for c in partition_columns}
    qualifiers = table_qualifiers(analysis.tree)
    for cond in _conjuncts(where.this):
        names = _column_names(cond, qualifiers)
        if not names:
            continue
        lowered = {n.lower() for n in names}
        if lowered <= key_set | part_set:
            text = unqualified(cond, qualifiers).sql(dialect=DIALECT)
            result.predicates.append(text)
            if lowered <= part_set:
                result.partition_predicates.append(text)
    return result
