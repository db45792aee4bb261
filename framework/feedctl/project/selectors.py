"""Feed selection for `-s`: feed names, `tag:x`, `table:source.table`, `sink:name`; the union of all given."""

from __future__ import annotations

from feedctl.diagnostics import Diagnostic, UsageError, did_you_mean
from feedctl.project.model import Project

METHODS = ("tag", "table", "sink")


def _matches(project: Project, method: str, value: str, query_tables) -> tuple[list[str], list[str]]:
    """Feeds matching one selector, and the values that method could have matched (for "did you mean")."""
    feeds = project.feeds.values()
    if method == "tag":
        return [f.name for f in feeds if value in f.tags], sorted({t for f in feeds for t in f.tags})
    if method == "sink":
        return [f.name for f in feeds if f.sink == value], sorted(project.sinks)
    # A query feed's table is the one its rendered query names through source().
    matched = [f.name for f in feeds if value in f.tables or (f.query_file and value in query_tables(f))]
    return matched, sorted(project.tables)


def select_feeds(
    project: Project, selectors: list[str], query_tables=lambda feed: []
) -> tuple[list[str], list[Diagnostic]]:
    """Names of the selected feeds (all when no selector) in definition order, and one error per selector
    that matched nothing. `query_tables(feed)` gives the tables a query feed reads, for `table:`.
    Raises UsageError for a selector of an unknown kind."""
    if not selectors:
        return list(project.feeds), []
    chosen: set[str] = set()
    problems: list[Diagnostic] = []
    for selector in selectors:
        method, sep, value = selector.partition(":")
        if not sep:
            if selector in project.feeds:
                chosen.add(selector)
                continue
            problems.append(
                Diagnostic(
                    "",
                    0,
                    0,
                    "FC601",
                    f'no feed named "{selector}"',
                    expected="a feed name, tag:<tag>, table:<source.table> or sink:<sink>",
                    hint=did_you_mean(selector, project.feeds),
                )
            )
            continue
        if method == "state":
            raise UsageError(
                f'"{selector}" compares with a deployed build: compile, ls, plan and test take it, with --state DIR'
            )
        if method not in METHODS or not value:
            raise UsageError(
                f'bad selector "{selector}": expected a feed name, tag:<tag>, '
                f"table:<source.table> or sink:<sink> {did_you_mean(method, METHODS)}".strip()
            )
        matched, known = _matches(project, method, value, query_tables)
        if not matched:
            problems.append(
                Diagnostic("", 0, 0, "FC602", f'selector "{selector}" matched no feed', hint=did_you_mean(value, known))
            )
        chosen.update(matched)
    return [name for name in project.feeds if name in chosen], problems
