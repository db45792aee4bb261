"""The CDC-query rules: a rendered query is one SELECT over one table, row by row, deterministic.

CockroachDB evaluates a CDC query on each change independently (reference §6); anything that needs more
than the one row and its previous version (joins, sub-selects, aggregates, windows, ordering, limits) or
gives a different answer on a re-run (rand, now, uuid) cannot be a changefeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from feedctl.compiler.query_names import column_path, table_qualifiers
from feedctl.compiler.query_text import line_col_offset, offset_of, unclosed_quote
from feedctl.diagnostics import did_you_mean
from feedctl.frame import PREV

DIALECT = "spark"
CDC_FUNCTIONS = {"event_op", "event_schema_timestamp", "changefeed_creation_timestamp"}

NON_DETERMINISTIC = {
    "rand",
    "randn",
    "random",
    "uniform",
    "randstr",
    "uuid",
    "shuffle",
    "now",
    "current_timestamp",
    "current_date",
    "curdate",
    "current_time",
    "localtimestamp",
    "current_datetime",
    "unix_timestamp",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
    "input_file_block_start",
    "input_file_block_length",
    "reflect",
    "java_method",
    "try_reflect",
}
# written without parentheses Spark still calls these; sqlglot reads them as columns
BARE_NON_DETERMINISTIC = {"localtimestamp", "current_time"}
GENERATORS = {
    "explode",
    "explode_outer",
    "posexplode",
    "posexplode_outer",
    "inline",
    "inline_outer",
    "stack",
    "json_tuple",
}
AGGREGATES = {
    "count",
    "sum",
    "avg",
    "mean",
    "min",
    "max",
    "collect_list",
    "collect_set",
    "array_agg",
    "first",
    "last",
    "any_value",
    "count_if",
    "stddev",
    "variance",
    "percentile",
    "bool_and",
    "bool_or",
    "every",
    "some",
    "any",
    "max_by",
    "min_by",
    "approx_count_distinct",
    "median",
    "mode",
}


@dataclass
class QueryProblem:
    code: str
    message: str
    offset: int | None = None  # character offset in the rendered SQL
    snippet: str = ""
    expected: str = ""
    hint: str = ""


@dataclass
class QueryAnalysis:
    table: str | None = None  # FROM table as `source.table`, unquoted
    columns: set[str] = field(default_factory=set)  # columns of the table the query reads
    prev_columns: set[str] = field(default_factory=set)  # columns read through cdc_prev
    star: bool = False
    cdc_functions: set[str] = field(default_factory=set)
    problems: list[QueryProblem] = field(default_factory=list)
    tree: exp.Select | None = None
    column_nodes: list[tuple[str, exp.Column]] = field(default_factory=list)  # (column, node) for checks
    # unqualified names in the select list that an earlier projection alias also defines: Spark reads the
    # table column when there is one, the alias (lateral column alias) otherwise
    alias_refs: set[str] = field(default_factory=set)
    sql: str = ""


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def analyze(sql: str) -> QueryAnalysis:
    """Parse the rendered SQL and apply every rule that needs no table schema."""
    result = QueryAnalysis(sql=sql)
    deep = _too_deep(sql)
    if deep is not None:
        result.problems.append(deep)
        return result
    try:
        parsed = sqlglot.parse(sql, read=DIALECT)
        statements = [s for s in parsed if s is not None]
    except RecursionError:  # a shape the bounds below did not foresee: refused all the same
        result.problems.append(
            QueryProblem(
                "FC501",
                "SQL nests too deeply to analyze",
                expected="a CDC query of a few levels of parentheses and conditions",
            )
        )
        return result
    except TokenError:  # sqlglot says only where the statement starts
        opened = unclosed_quote(sql)
        mark = "" if opened is None else "/*" if sql.startswith("/*", opened) else sql[opened]
        result.problems.append(
            QueryProblem(
                "FC501",
                f"SQL does not parse: a {mark} opened here is never closed"
                if mark
                else "SQL does not parse: it cannot be read as tokens",
                offset=opened,
                snippet=mark,
            )
        )
        return result
    except ParseError as exc:
        errors = getattr(exc, "errors", None) or [{}]
        first = errors[0]
        highlight = str(first.get("highlight") or "")
        result.problems.append(
            QueryProblem(
                "FC501",
                f"SQL does not parse: {first.get('description', exc)}",
                offset=line_col_offset(sql, first.get("line"), first.get("col"), len(highlight)),
                snippet=highlight,
            )
        )
        return result
    if not statements:
        result.problems.append(QueryProblem("FC502", "the query is empty", expected="a SELECT statement"))
        return result
    if parsed[0] is None:  # `;SELECT ...`: whatever reads the query takes its first statement, an empty one
        result.problems.append(
            QueryProblem(
                "FC503",
                "an empty statement (a ';' with nothing before it) comes before the query",
                offset=_first_semicolon(sql),
                snippet=";",
                expected="exactly one SELECT",
            )
        )
        return result
    if len(statements) > 1:
        result.problems.append(
            QueryProblem(
                "FC503",
                f"{len(statements)} statements where one is allowed",
                offset=offset_of(statements[1]),
                expected="exactly one SELECT",
            )
        )
    root = statements[0]
    while isinstance(root, exp.Subquery) and not root.alias:  # (SELECT ...) is still one SELECT
        root = root.this
    if isinstance(root, exp.SetOperation):
        kind = type(root).__name__.upper()
        result.problems.append(
            QueryProblem(
                "FC508",
                f"set operation {kind} is not allowed in a CDC query",
                offset=offset_of(root.expression, sql, type(root).__name__),
                snippet=type(root).__name__.upper(),
                expected="one SELECT over one table",
            )
        )
        return result
    if not isinstance(root, exp.Select):
        result.problems.append(
            QueryProblem(
                "FC502",
                f"{root.key.upper()} statement is not allowed",
                offset=offset_of(root),
                expected="a SELECT statement",
                hint="a CDC query only reads; it cannot change data",
            )
        )
        return result
    result.tree = root
    nodes = _Nodes(root)
    _check_shape(root, result, nodes)
    _check_functions(root, result, nodes)
    _collect_columns(root, result, nodes)
    return result


MAX_NESTING = 48  # parentheses within parentheses
MAX_CONDITIONS = 500  # ANDs and ORs: the parser nests one level per operator


def _too_deep(sql: str) -> QueryProblem | None:
    """A query the parser would recurse too deep on, said before it does."""
    try:
        tokens = sqlglot.tokenize(sql, read=DIALECT)
    except TokenError:
        return None  # the parser says what is wrong
    depth, conditions = 0, 0
    for token in tokens:
        if token.token_type == sqlglot.TokenType.L_PAREN:
            depth += 1
            if depth > MAX_NESTING:
                return QueryProblem(
                    "FC501",
                    f"SQL nested more than {MAX_NESTING} parentheses deep",
                    offset=token.start,
                    snippet="(",
                    expected="a CDC query of a few levels",
                )
        elif token.token_type == sqlglot.TokenType.R_PAREN:
            depth -= 1
        elif token.token_type in (sqlglot.TokenType.AND, sqlglot.TokenType.OR):
            conditions += 1
            if conditions > MAX_CONDITIONS:
                return QueryProblem(
                    "FC501",
                    f"SQL of more than {MAX_CONDITIONS} ANDs and ORs",
                    offset=token.start,
                    snippet=token.text,
                    expected="fewer conditions (an IN list for many values)",
                )
    return None


def _problem(result: QueryAnalysis, code: str, message: str, node, word: str = "", **kw) -> None:
    snippet = node.sql(dialect=DIALECT) if isinstance(node, exp.Expression) else ""
    offset = offset_of(node, result.sql, word) if node is not None else None
    result.problems.append(QueryProblem(code, message, offset=offset, snippet=snippet[:80], **kw))


class _Nodes:
    """Every node of a query, from one walk: the rules ask for nodes by type dozens of times."""

    def __init__(self, root: exp.Expression):
        self.nodes = list(root.walk())

    def all(self, kind):
        return [n for n in self.nodes if isinstance(n, kind)]

    def first(self, kind):
        return next((n for n in self.nodes if isinstance(n, kind)), None)


def _check_shape(root: exp.Select, result: QueryAnalysis, nodes: _Nodes) -> None:
    one = "one row at a time: a CDC query sees each change alone"
    if root.args.get("with_") or nodes.first(exp.CTE):
        _problem(result, "FC507", "WITH (common table expressions) is not allowed", nodes.first(exp.CTE))
    for sub in nodes.all(exp.Select):
        if sub is not root and not isinstance(sub.parent, exp.CTE):  # a CTE's body is said by FC507
            _problem(result, "FC506", "sub-selects are not allowed", sub, hint=one)
            break
    for setop in nodes.all(exp.SetOperation):
        _problem(result, "FC508", f"set operation {type(setop).__name__.upper()} is not allowed", setop)
        break
    if join := nodes.first(exp.Join):
        _problem(result, "FC505", "joins are not allowed", join, hint="a CDC query reads exactly one table")
    if lateral := nodes.first(exp.Lateral):
        _problem(result, "FC517", "LATERAL VIEW is not allowed", lateral, hint="a change must give one message")
    if unpivot := next((p for p in nodes.all(exp.Pivot) if p.args.get("unpivot")), None):
        _problem(
            result, "FC517", "UNPIVOT is not allowed", unpivot, word="unpivot", hint="a change must give one message"
        )
    if sample := nodes.first(exp.TableSample):
        _problem(
            result,
            "FC516",
            "TABLESAMPLE is not allowed",
            sample,
            word="tablesample",
            hint="a re-run must emit the same messages",
        )
    ordering = "messages are ordered by event timestamp and key"
    clauses = (
        ("group", "FC511", "GROUP BY", one),
        ("having", "FC512", "HAVING", one),
        ("order", "FC513", "ORDER BY", ordering),
        ("sort", "FC513", "SORT BY", ordering),
        ("cluster", "FC513", "CLUSTER BY", ordering),
        ("distribute", "FC513", "DISTRIBUTE BY", ordering),
        ("limit", "FC514", "LIMIT", one),
        ("offset", "FC514", "OFFSET", one),
        ("qualify", "FC510", "QUALIFY", one),
    )
    for key, code, word, hint in clauses:
        if node := root.args.get(key):
            _problem(result, code, f"{word} is not allowed", node, word=word.split()[0], hint=hint)
    if root.args.get("distinct"):
        _problem(result, "FC515", "DISTINCT is not allowed", root.args["distinct"], word="distinct", hint=one)
    tables = [t for t in nodes.all(exp.Table) if isinstance(t.this, exp.Identifier)]
    from_ = root.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table) or len(tables) != 1:
        if from_ is None:
            _problem(result, "FC504", "the query reads no table", root, expected="FROM <one source table>")
        elif not result.problems:
            _problem(
                result,
                "FC504",
                "a CDC query reads exactly one table",
                from_,
                expected="FROM {{ source('<source>', '<table>') }}",
            )
    if from_ is not None and isinstance(from_.this, exp.Table):
        result.table = ".".join(p.name for p in from_.this.parts)


def _check_functions(root: exp.Select, result: QueryAnalysis, nodes: _Nodes) -> None:
    for node in nodes.all(exp.Window):
        _problem(result, "FC510", "window functions are not allowed", node, hint="a CDC query sees each change alone")
        break
    for node in nodes.all(exp.Func):
        name = _function_name(node)
        if isinstance(node, exp.Window) or isinstance(node.parent, exp.Window):
            continue
        if name in CDC_FUNCTIONS:
            result.cdc_functions.add(name)
            if node.expressions or (not isinstance(node, exp.Anonymous) and node.args.get("this")):
                _problem(result, "FC520", f"{name}() takes no arguments", node)
        elif name in NON_DETERMINISTIC and not (name == "unix_timestamp" and node.args.get("this")):
            _problem(
                result,
                "FC516",
                f"{name}() is not deterministic",
                node,
                word=name,
                hint="a re-run must emit the same messages; use event_op(), event_schema_timestamp() "
                "or a column of the row",
            )
        elif isinstance(node, (exp.Explode, exp.Inline)) or name in GENERATORS:
            _problem(
                result,
                "FC517",
                f"generator function {name}() is not allowed",
                node,
                hint="a change must give one message",
            )
        elif isinstance(node, exp.AggFunc) or name in AGGREGATES:
            _problem(
                result,
                "FC509",
                f"aggregate function {name}() is not allowed",
                node,
                hint="a CDC query sees each change alone",
            )
    for node in nodes.all(exp.Any):  # any(x) is Spark's aggregate; `x LIKE ANY (...)` is not
        if not (node.arg_key == "expression" and isinstance(node.parent, exp.Predicate)):
            _problem(
                result,
                "FC509",
                "aggregate function any() is not allowed",
                node,
                hint="a CDC query sees each change alone",
            )
    for col in nodes.all(exp.Column):
        if not col.table and not col.this.args.get("quoted") and col.name.lower() in BARE_NON_DETERMINISTIC:
            _problem(
                result,
                "FC516",
                f"{col.name.lower()} is not deterministic",
                col,
                hint="a re-run must emit the same messages; use event_op(), event_schema_timestamp() "
                "or a column of the row",
            )


def _collect_columns(root: exp.Select, result: QueryAnalysis, nodes: _Nodes) -> None:
    qualifiers = table_qualifiers(root)
    for node in nodes.all(exp.Star):
        if isinstance(node.parent, exp.Column) and node.parent.table.lower() == PREV:
            result.prev_columns.add("*")
        elif not isinstance(node.parent, exp.Count):  # SELECT *, r.*, struct(*)
            result.star = True
    # A name an earlier projection defines as an alias is a lateral reference to it, not a column.
    defined_at: dict[str, int] = {}  # alias -> the first projection defining it
    projection_of: dict[int, int] = {}  # id(column node) -> the projection it is in
    for i, projection in enumerate(root.expressions):
        for col in projection.find_all(exp.Column):
            projection_of[id(col)] = i
        if isinstance(projection, exp.Alias) and projection.alias:
            defined_at.setdefault(projection.alias.lower(), i)
    for col in nodes.all(exp.Column):
        if isinstance(col.this, exp.Star):
            continue
        prev, parts = column_path(col, qualifiers)
        if prev:
            if parts:
                result.prev_columns.add(parts[0])
                result.column_nodes.append((parts[0], col))
            continue
        name = parts[0]
        at = projection_of.get(id(col))
        if len(col.parts) == 1 and at is not None and defined_at.get(name.lower(), at) < at:
            result.alias_refs.add(name)
            continue
        result.columns.add(name)
        result.column_nodes.append((name, col))


def check_columns(analysis: QueryAnalysis, table_columns: list[str]) -> list[QueryProblem]:
    """Every column the query names must exist in the table (Spark resolves names case-insensitively)."""
    known = {c.lower() for c in table_columns}
    problems, seen = [], set()
    for name, node in analysis.column_nodes:
        if name.lower() in known or name == PREV or (name, offset_of(node)) in seen:
            continue
        seen.add((name, offset_of(node)))
        problems.append(
            QueryProblem(
                "FC518",
                f'column "{name}" does not exist in {analysis.table}',
                offset=offset_of(node),
                snippet=name,
                expected="one of " + ", ".join(table_columns),
                hint=did_you_mean(name, table_columns),
            )
        )
    return problems


def _first_semicolon(sql: str) -> int | None:
    """Where the first `;` of the query is, outside comments and strings."""
    for token in Dialect.get_or_raise(DIALECT).tokenize(sql):
        if token.token_type == TokenType.SEMICOLON:
            return token.start
    return None
