"""Where in a CDC query's text a problem is: sqlglot keeps the positions of some tokens, not of keywords, and
says a parse error's place by line and last column; a quote or comment left open is found before parsing."""

from __future__ import annotations

import re

from sqlglot import exp


def _own_offset(node) -> int | None:
    return node.meta["start"] if isinstance(node, exp.Expression) and "start" in node.meta else None


def offset_of(node: exp.Expression, sql: str = "", word: str = "") -> int | None:
    """Where a node starts in the SQL. sqlglot keeps positions of tokens such as names and literals, not of
    keywords: with `word` (a clause's keyword), the last place it is written before the node's first
    token; else that first token; for nodes sqlglot made up (`current_timestamp` without parentheses,
    DISTINCT), the first place `word` is written, else the nearest enclosing node with a position."""
    if (start := _own_offset(node)) is not None:
        return start
    start = next((s for n in node.walk() if (s := _own_offset(n)) is not None), None)
    if word and sql:
        pattern = rf"(?<![\w`]){re.escape(word)}(?![\w`])"
        found = [m.start() for m in re.finditer(pattern, sql if start is None else sql[:start], re.IGNORECASE)]
        if found:
            return found[0] if start is None else found[-1]
    if start is not None:
        return start
    parent = node.parent
    while parent is not None:
        if (start := _own_offset(parent)) is not None:
            return start
        parent = parent.parent
    return None


def unclosed_quote(sql: str) -> int | None:
    """Where a string, a quoted name or a block comment that never ends opens (None: none does)."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                return i
            i = end + 2
        elif c in "'\"`":
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if sql[j] == "\\" else 1
            if j >= n:
                return i
            i = j + 1
        else:
            i += 1
    return None


def line_col_offset(sql: str, line, col, length: int = 1) -> int | None:
    """sqlglot's error `col` is the 1-based column of the last character of the offending token."""
    if not line:
        return None
    lines = sql.split("\n")
    return sum(len(x) + 1 for x in lines[: int(line) - 1]) + max(int(col or 1) - max(length, 1), 0)
