"""A unit test run through the same code `feedctl run` runs (no second implementation of a feed): the given
commits are written as Delta tables of the tables' schemas, a copy of the project points the feed's tables
at them and its sink at a folder, `run` emits the feed from before the first commit, and the messages it
wrote are read back.

The copy emits JSON, `wrapped`, with `diff` and `updated` (what a test compares: key, after, before and
order), whatever the feed's format and envelope; every other option, the query, macros and vars are the
project's. Its tables are read as `changes: auto`: the test's tables are not the project's.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

from feedctl.project.model import FeedDef, Project
from feedctl.unit_tests.spec import Change, Given, UnitTest

SINK = "unit_test_out"
# Options the copy sets: what the messages show, and where the job starts.
SHOWN = {"format": "json", "envelope": "wrapped", "diff": True, "updated": True, "initial_scan": "no"}
DROPPED = ("cursor", "end_time", "resolved", "compression")


@dataclass(frozen=True)
class Emitted:
    key: list
    after: dict | None
    before: dict | None
    updated: str


def write_table(path: Path, schema: pa.Schema, key: list[str], given: Given) -> None:
    """Version 0 empty, then a version per commit: the table as the commit leaves it."""
    from deltalake import write_deltalake

    write_deltalake(str(path), schema.empty_table())
    rows: dict[str, dict] = {}
    for commit in given.commits:
        for change in commit:
            rows = _applied(rows, change, key)
        table = _table(list(rows.values()), schema)
        write_deltalake(str(path), table, mode="overwrite")


def _applied(rows: dict[str, dict], change: Change, key: list[str]) -> dict[str, dict]:
    missing = [c for c in key if c not in change.row]
    if missing:
        raise ValueError(f"a change's row lacks the key column {', '.join(missing)}: {change.row}")
    k = json.dumps([change.row[c] for c in key], default=str)
    out = dict(rows)
    if change.op == "delete":
        if k not in out:
            raise ValueError(f"a delete of key {k}, which no earlier change inserted")
        del out[k]
    elif change.op == "update" and k not in out:
        raise ValueError(f"an update of key {k}, which no earlier change inserted")
    elif change.op == "insert" and k in out:
        raise ValueError(f"an insert of key {k}, which an earlier change inserted already")
    else:
        out[k] = dict(change.row)
    return out


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """The rows at the table's types: YAML's values (ints, strings, floats) cast as a column of them would."""
    unknown = {c for r in rows for c in r} - set(schema.names)
    if unknown:
        raise ValueError(f"columns the table does not have: {', '.join(sorted(unknown))}")
    columns = []
    for field in schema:
        values = [r.get(field.name) for r in rows]
        try:
            columns.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            try:
                columns.append(pa.array(values).cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                raise ValueError(f"column {field.name}: {values} cannot be read as {field.type} ({exc})") from None
    return pa.Table.from_arrays(columns, schema=schema)


def copy_project(project: Project, feed: FeedDef, tables: dict[str, Path], work: Path) -> Path:
    """A project in `work`: the project's, its `tables` pointed at the test's, the feed alone into a folder."""
    root = work / "project"
    root.mkdir(parents=True)
    data = yaml.safe_load((project.root / "project.yml").read_text())
    data["state"] = f"sqlite:///{work / 'state.db'}"
    for source in data.get("sources", []):
        for table in source.get("tables", []):
            fqn = f"{source['name']}.{table['name']}"
            if fqn in tables:
                table.update({"path": str(tables[fqn]), "changes": "auto"})
                table.pop("storage_options", None)
        source.pop("storage_options", None)
    (root / "project.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    if (project.root / "macros").is_dir():
        shutil.copytree(project.root / "macros", root / "macros")
    entry: dict = {"name": feed.name, "sink": SINK}
    (root / "feeds").mkdir()
    if feed.query_file:
        shutil.copyfile(project.root / feed.query_file, root / "feeds" / Path(feed.query_file).name)
        entry["query"] = Path(feed.query_file).name
    else:
        entry["tables"] = list(feed.tables)
    options = {k: v for k, v in feed.options.items() if k not in DROPPED}
    entry["options"] = {**options, **SHOWN, "cursor": "version:0"}
    (root / "feeds" / "unit_test.yml").write_text(yaml.safe_dump({"feeds": [entry]}, sort_keys=False))
    (root / "sinks").mkdir()
    sink = {"name": SINK, "uri": f"file://{work / 'sink'}"}
    (root / "sinks" / "unit_test.yml").write_text(yaml.safe_dump({"sinks": [sink]}, sort_keys=False))
    return root


def emitted(sink: Path) -> list[Emitted]:
    """The messages of the sink's data files, in the order the test compares: by `updated`, then key."""
    out = []
    for path in sorted(sink.rglob("*.ndjson"), key=lambda p: p.name):
        for line in path.read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                out.append(Emitted(m["key"], m.get("after"), m.get("before"), m["updated"]))
    return sorted(out, key=lambda m: (m.updated, json.dumps(m.key, default=str)))


def run_test(
    test: UnitTest, project: Project, feed: FeedDef, schemas: dict[str, pa.Schema], work: Path, run
) -> list[Emitted]:
    """Run one test's feed over its given commits with `run(project_root, feed)` (`feedctl run`, returning
    its reports): the messages emitted, or raises RunFailed."""
    tables = {}
    for given in test.given:
        if given.table not in project.tables:
            raise ValueError(f"no table {given.table} in project.yml")
        path = work / "tables" / given.table
        write_table(path, schemas[given.table], project.tables[given.table].primary_key, given)
        tables[given.table] = path
    root = copy_project(project, feed, tables, work)
    reports = run(root, feed.name)
    failed = [r for r in reports if r.error]
    if failed:
        raise RunFailed(failed[0].error)
    return emitted(work / "sink")


class RunFailed(Exception):
    """The feed's run over the test's commits failed: said as the run says it."""
