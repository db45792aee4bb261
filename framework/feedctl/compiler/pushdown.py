"""What a reader can skip: the columns a query needs and its predicates on partition and key columns.

Only top-level AND-ed conditions that name nothing but partition or key columns are pushed down. A snapshot
holds whole rows, so its reader skips every file such a condition rules out (partition values exactly, key
columns by the files' statistics). Change rows are subtler:
- a condition on key columns holds for a change's before and after rows alike (a key change is a delete plus
  an insert, and a delete keeps its key), so filtering change rows by it never drops a change the query keeps;
- a condition on a partition column that is not a key is applied to change rows only when it is false for a
  delete (whose other columns the query sees as NULL), and when the feed shows nothing of the row before a
  change (no `diff`, `cdc_prev` or `event_op()`): a row moved into the selected partition is then read without
  its before row, as an insert, and an insert and an update look the same.

The reader (delta-rs) parses conditions as DataFusion SQL, so only comparisons of plain columns and literals
(`=`, `<>`, `<`, `IN`, `BETWEEN`, `IS [NOT] NULL`, with AND, OR, NOT) go to it, each column quoted as the table
spells it.
"""

from __future__ import annotations

from sqlglot import exp

from feedctl.compiler.cdc_query import CDC_FUNCTIONS, DIALECT, QueryAnalysis, _function_name
from feedctl.compiler.query_names import column_path, table_qualifiers, unqualified
from feedctl.compiler.read_plan import Pushdown

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_READER_NODES = (
    *_COMPARISONS,
    exp.In,
    exp.Between,
    exp.Is,
    exp.Not,
    exp.And,
    exp.Or,
    exp.Paren,
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Neg,
)


def _reader_form(cond: exp.Expression, spelling: dict[str, str]) -> str | None:
    """`cond` as the Delta reader evaluates it, or None when it is more than plain comparisons."""
    for node in cond.walk():
        if not isinstance(node, _READER_NODES) or (isinstance(node, exp.Column) and len(node.parts) > 1):
            return None
        if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("unnest")):
            return None

    def quote(n):
        if isinstance(n, exp.Column):
            return exp.column(spelling.get(n.name.lower(), n.name), quoted=True)
        return n

    return cond.copy().transform(quote).sql(dialect=DIALECT)


def _plain(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Column, exp.Literal, exp.Boolean)) or (
        isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)
    )


def _false_for_null(node: exp.Expression) -> bool:
    """Whether `node` is never true when its columns are NULL (conservative: False when unsure)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, _COMPARISONS):
        return _plain(node.left) and _plain(node.right)
    if isinstance(node, exp.In):
        return _plain(node.this) and all(_plain(e) for e in node.expressions)
    if isinstance(node, exp.Between):
        return all(_plain(node.args[k]) for k in ("this", "low", "high"))
    if isinstance(node, exp.Not):  # IS NOT NULL
        return isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null)
    if isinstance(node, exp.And):
        return _false_for_null(node.left) or _false_for_null(node.right)
    if isinstance(node, exp.Or):
        return _false_for_null(node.left) and _false_for_null(node.right)
    return False


def _joined(conditions: list[str]) -> str | None:
    if len(conditions) < 2:
        return conditions[0] if conditions else None
    return " AND ".join(f"({c})" for c in conditions)


def with_regions(condition: str | None, column: str, values) -> str:
    """`condition` narrowed to the rows of some regions of a regional-by-row table (None: the NULL region):
    a node reads only its own regions' data, and only their files where the table is partitioned by region."""
    col = exp.column(column, quoted=True)
    named = sorted(v for v in values if v is not None)
    either = [col.isin(*[exp.Literal.string(str(v)) for v in named])] if named else []
    if None in values:
        either.append(exp.Is(this=col.copy(), expression=exp.Null()))
    return _joined([c for c in (condition, exp.or_(*either).sql(dialect=DIALECT)) if c])


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


def derive(
    analysis: QueryAnalysis | None,
    all_columns: list[str] | None,
    key: list[str],
    partition_columns: list[str],
    extra: list[str] = (),
    diff: bool = False,
) -> Pushdown:
    """Pushdown for one table. Without a query, every column and no predicate. `diff`: the feed's option."""
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
    spelling = {c.lower(): c for c in [*key, *partition_columns, *(all_columns or [])]}
    before_shown = diff or bool(analysis.prev_columns) or "event_op" in analysis.cdc_functions
    qualifiers = table_qualifiers(analysis.tree)
    scan, changes = [], []
    for cond in _conjuncts(where.this):
        names = _column_names(cond, qualifiers)
        if not names:
            continue
        lowered = {n.lower() for n in names}
        if lowered <= key_set | part_set:
            cond = unqualified(cond, qualifiers)
            text = cond.sql(dialect=DIALECT)
            result.predicates.append(text)
            if lowered <= part_set:
                result.partition_predicates.append(text)
            reader = _reader_form(cond, spelling)
            if reader is not None:
                scan.append(reader)
                if lowered <= key_set or (not before_shown and _false_for_null(cond)):
                    changes.append(reader)
    result.scan_filter, result.change_filter = _joined(scan), _joined(changes)
    return result
