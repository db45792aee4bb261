"""The feeds a change made since a deployed build (dbt's slim CI): `-s state:modified` and `state:modified+`
against `--state DIR`, the `target/` an earlier `feedctl compile` wrote.

A feed is modified when what it emits, or what says what it is, differs from the build's manifest: a feed
that is new; its entry (tables, sink, options, description, tags, meta); its query as compiled (its file,
the macros and vars it renders with); its sink's definition; the definition in project.yml of a table it
reads (path, primary key, region column, locality, spans, `changes`, storage options). Where a feed is
defined (its file and line) is not a change, nor are a table's newest version and columns, which come from
the table and not from the project. `state:modified+` adds the feeds that write to the sink of a modified
feed: what the consumers of that sink read changes with it.
"""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import ValidationError

from feedctl.compiler.compile import CompileResult, compile_project
from feedctl.compiler.manifest import build_manifest, validate_manifest
from feedctl.diagnostics import ProjectError, UsageError
from feedctl.project.selectors import select_feeds

STATES = ("modified", "modified+")
# What a feed's entry says of where it is defined, or reads from its tables (the columns `SELECT *` gives, and
# whether they could be opened): no change of the project.
_PLACE = ("file", "line", "columns", "pushdown", "schema_checked")
_FROM_TABLE = ("version", "columns", "partition_columns", "types")  # what a table's entry reads from the table


def read_manifest(state: Path) -> dict:
    """The manifest of the build in `state` (its `target/`), checked against this feedctl's schema."""
    path = state / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"--state {state}: cannot read {path} ({exc}); pass the folder an earlier `feedctl "
            "compile` wrote (its target/)"
        ) from None
    try:
        validate_manifest(manifest)
    except ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top"
        raise UsageError(
            f"--state {state}: {path} is not a manifest `feedctl compile` writes ({exc.message}, at "
            f"{where}); compile the earlier project again, with this feedctl"
        ) from None
    return manifest


def compile_selected(project_dir, selectors: list[str] | None, state_dir: str | None, **options) -> CompileResult:
    """`compile_project` with `selectors`, `state:` ones among them: then every feed is compiled, compared
    with the build in `state_dir`, and those selected kept."""
    states, others = state_selectors(selectors or [])
    if not states:
        return compile_project(project_dir, selectors, **options)
    if state_dir is None:
        raise UsageError("-s state:modified compares with a deployed build: pass --state DIR (its target/)")
    result = compile_project(project_dir, None, **options)
    chosen, problems = (
        select_feeds(
            result.project, others, lambda feed: result.feeds[feed.name].tables if feed.name in result.feeds else []
        )
        if others
        else ([], [])
    )
    if problems:
        raise ProjectError(problems)
    current = build_manifest(result)
    changed = modified(current, read_manifest(Path(state_dir)))
    selected = set(chosen) | (with_sink_neighbours(changed, current) if "modified+" in states else changed)
    result.feeds = {name: compiled for name, compiled in result.feeds.items() if name in selected}
    return result


def state_selectors(selectors: list[str]) -> tuple[list[str], list[str]]:
    """The `state:` selectors' values, and the other selectors; an unknown state is a usage error."""
    states, others = [], []
    for selector in selectors:
        method, _, value = selector.partition(":")
        if method != "state":
            others.append(selector)
        elif value not in STATES:
            raise UsageError(f'bad selector "{selector}": expected state:modified or state:modified+')
        else:
            states.append(value)
    return states, others


def modified(current: dict, deployed: dict) -> set[str]:
    """The feeds of manifest `current` that differ from manifest `deployed` (see the module's text)."""
    out = set()
    for name, feed in current["feeds"].items():
        before = deployed["feeds"].get(name)
        if before is None or _without(feed, _PLACE) != _without(before, _PLACE):
            out.add(name)
            continue
        tables = [_without(current["sources"].get(t), _FROM_TABLE) for t in feed["tables"]]
        if tables != [_without(deployed["sources"].get(t), _FROM_TABLE) for t in feed["tables"]]:
            out.add(name)
        elif feed["sink"] and current["sinks"].get(feed["sink"]) != deployed["sinks"].get(feed["sink"]):
            out.add(name)
    return out


def with_sink_neighbours(names: set[str], current: dict) -> set[str]:
    """`names`, and the feeds that write to the sink of one of them."""
    sinks = {current["feeds"][n]["sink"] for n in names if current["feeds"][n]["sink"]}
    return names | {n for n, f in current["feeds"].items() if f["sink"] in sinks}


def _without(entry: dict | None, keys: tuple[str, ...]) -> dict | None:
    return None if entry is None else {k: v for k, v in entry.items() if k not in keys}
