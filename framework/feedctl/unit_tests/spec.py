"""A feed's unit tests, as users write them in `tests/*.yml` or beside their feeds, under `unit_tests:` in a
feed file (dbt's unit tests, for changefeeds): given the changes of a feed's tables, commit by commit, the
messages the feed must emit.

```yaml
unit_tests:
  - name: large_orders_only
    feed: large_orders
    given:
      - table: shop.orders
        commits:
          - [{op: insert, row: {id: 1, amount: 5}}, {op: insert, row: {id: 2, amount: 50}}]
          - [{op: update, row: {id: 2, amount: 60}}, {op: delete, row: {id: 1}}]
    expect:
      - {key: [2], after: {id: 2, amount: 50}}
      - {key: [2], after: {id: 2, amount: 60}, before: {id: 2, amount: 50}}
```

A change's `row` holds the table's columns (a column left out is null; a delete needs its key alone). The
messages are expected in the order the feed emits them: commit by commit, and within a commit by key; a
message matches on its key and `after`, and on `before` where the test gives one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from feedctl.diagnostics import Diagnostic
from feedctl.project.files import Unreadable, read_text
from feedctl.project.loader import find_files
from feedctl.project.yaml_source import parse_yaml

OPS = ("insert", "update", "delete")
FOLDER = "tests"


@dataclass(frozen=True)
class Change:
    op: str
    row: dict


@dataclass(frozen=True)
class Given:
    table: str
    commits: tuple[tuple[Change, ...], ...]


@dataclass(frozen=True)
class Expected:
    key: list
    after: dict | None
    before: dict | None = None
    checks_before: bool = False  # the test gives `before`


@dataclass(frozen=True)
class UnitTest:
    name: str
    feed: str
    given: tuple[Given, ...]
    expect: tuple[Expected, ...]
    file: str  # relative to the project
    line: int


def load(root: Path) -> tuple[list[UnitTest], list[Diagnostic]]:
    """Every test of `tests/*.yml` and of the feed files' `unit_tests:`, and what is wrong with the files (a
    test that is malformed is left out)."""
    tests, problems = [], []
    feed_files = find_files(root, "feeds", (".yml", ".yaml"))
    for path in [*find_files(root, FOLDER, (".yml", ".yaml")), *feed_files]:
        relative = str(path.relative_to(root))
        try:
            doc, found = parse_yaml(read_text(path), relative)
        except Unreadable as exc:
            problems.append(Diagnostic(relative, exc.line, exc.column, "FC002", f"cannot read file: {exc}"))
            continue
        problems += found
        if doc is None:
            continue
        entries = doc.data.get("unit_tests") if isinstance(doc.data, dict) else None
        if path in feed_files and entries is None:
            continue  # a feed file without tests
        if not isinstance(entries, list):
            problems.append(_problem(relative, 1, "the file has no `unit_tests:` list"))
            continue
        for i, entry in enumerate(entries):
            line = _line(doc, ("unit_tests", i))
            try:
                tests.append(_test(entry, relative, line))
            except ValueError as exc:
                problems.append(_problem(relative, line, f"unit test {i + 1}: {exc}"))
    return tests, problems


def _test(entry, file: str, line: int) -> UnitTest:
    if not isinstance(entry, dict):
        raise ValueError("expected a mapping with name, feed, given and expect")
    missing = [k for k in ("name", "feed", "given", "expect") if k not in entry]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    given = []
    for g in _list(entry["given"], "given"):
        if not isinstance(g, dict) or "table" not in g or "commits" not in g:
            raise ValueError("each of `given` needs `table` and `commits`")
        commits = []
        for commit in _list(g["commits"], "commits"):
            changes = []
            for change in _list(commit, "a commit"):
                if (
                    not isinstance(change, dict)
                    or change.get("op") not in OPS
                    or not isinstance(change.get("row"), dict)
                ):
                    raise ValueError(f"a change is {{op: {' | '.join(OPS)}, row: {{column: value}}}}, not {change!r}")
                changes.append(Change(change["op"], dict(change["row"])))
            commits.append(tuple(changes))
        given.append(Given(str(g["table"]), tuple(commits)))
    expect = []
    for e in _list(entry["expect"], "expect"):
        if not isinstance(e, dict) or "key" not in e or "after" not in e:
            raise ValueError(f"an expected message is {{key: [...], after: {{...}} or null}}, not {e!r}")
        key = e["key"] if isinstance(e["key"], list) else [e["key"]]
        expect.append(Expected(key, e["after"], e.get("before"), "before" in e))
    return UnitTest(str(entry["name"]), str(entry["feed"]), tuple(given), tuple(expect), file, line)


def _list(value, what: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"`{what}` must be a list")
    return value


def _line(doc, path: tuple) -> int:
    return doc.position(path).line


def _problem(file: str, line: int, message: str) -> Diagnostic:
    expected = "see `feedctl test --help` and the manual's docs/guides/unit-tests.md"
    return Diagnostic(file, line, 1, "FC701", message, expected=expected)
