"""Helpers of the end-to-end run tests: small projects over real Delta tables, a reader of what a sink holds,
and an oracle of every committed state of every key, taken from the table's own snapshots (not its change feed).

The package's run machinery is imported where it is used, so that writing a project (unit tests do) needs none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import yaml

from support.projects import Cli, json_lines, write_delta
from support.spark import SPARK

HLC = re.compile(r"^[0-9]{19}\.[0-9]{10}$")
TS33 = re.compile(r"^[0-9]{33}$")


# --- projects -----------------------------------------------------------------------------------------


def write_project(
    root: Path,
    tables: dict[str, dict],
    feeds: list[dict],
    sinks: list[dict],
    files: dict[str, str] | None = None,
    vars: dict | None = None,
) -> Path:
    """A project with one source `s`; `tables` maps a name to its table entry (path, primary_key, spans)."""
    project = {
        "name": "e2e",
        "config-version": 1,
        "state": "sqlite:///target/state.db",
        "spark": SPARK,
        "sources": [{"name": "s", "tables": [{"name": n, **t} for n, t in tables.items()]}],
    }
    if vars:
        project["vars"] = vars
    root.mkdir(parents=True, exist_ok=True)
    (root / "project.yml").write_text(yaml.safe_dump(project, sort_keys=False))
    write_feeds(root, feeds)
    (root / "sinks").mkdir(exist_ok=True)
    (root / "sinks" / "sinks.yml").write_text(yaml.safe_dump({"sinks": sinks}, sort_keys=False))
    for relative, text in (files or {}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def write_feeds(root: Path, feeds: list[dict]) -> None:
    (root / "feeds").mkdir(parents=True, exist_ok=True)
    (root / "feeds" / "feeds.yml").write_text(yaml.safe_dump({"feeds": feeds}, sort_keys=False))


def file_sink(name: str, **options) -> dict:
    sink = {"name": name, "uri": f"file://target/sink/{name}"}
    if options:
        sink["options"] = options
    return sink


def run(root: Path, *selectors: str, **settings):
    """`feedctl run` in-process; a failed batch is not retried, so error tests stay fast."""
    from feedctl.commands.run import run_feeds
    from feedctl.node.settings import RunSettings

    settings = {"retries": 0, "retry_backoff": 0.01, **settings}
    return {r.feed: r for r in run_feeds(root, list(selectors) or None, RunSettings(**settings))}


def assert_verified(root: Path, *feeds: str) -> None:
    """`feedctl verify` finds nothing wrong with each feed's sink."""
    from feedctl.verify.feed import verify_feed

    for feed in feeds:
        report = verify_feed(root, feed)
        assert report.ok and report.messages, "\n".join(report.lines())


def jobs(root: Path) -> list[dict]:
    """Every job of the project's state store, oldest first."""
    result = Cli(root)("jobs", "--all", "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)


def job_of(root: Path, feed: str) -> dict:
    """The newest job of a feed."""
    return [j for j in jobs(root) if j["feed"] == feed][-1]


# --- the sink -----------------------------------------------------------------------------------------


@dataclass
class SinkFile:
    name: str  # relative to the sink, `/`-separated
    raw: bytes  # as stored
    text: str  # decompressed
    lines: list[dict] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def ts33(self) -> str:
        return self.base[:33]

    @property
    def resolved(self) -> bool:
        return self.base.endswith(".RESOLVED")

    @property
    def topic(self) -> str | None:
        """`<ts33>-<job>-<batch>-<span>-<file>-<topic>-<schema id>.ndjson...`: the topic of a data file."""
        return None if self.resolved else self.base.split(".ndjson")[0].split("-", 5)[5].rsplit("-", 1)[0]


def read_sink(folder: Path) -> list[SinkFile]:
    """Every file of a sink in lexicographic order of its name (emission order), each line parsed."""
    from feedctl.encoding.compression import decompress

    if not folder.exists():
        return []
    names = sorted(
        str(p.relative_to(folder)).replace("\\", "/")
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    out = []
    for name in names:
        raw = (folder / name).read_bytes()
        text = decompress(name, raw).decode("utf-8")
        assert text == "" or text.endswith("\n") or name.endswith(".RESOLVED"), name
        out.append(SinkFile(name, raw, text, [json.loads(line) for line in text.splitlines()]))
    return out


def sink_dir(root: Path, sink: str) -> Path:
    return root / "target" / "sink" / sink


def messages(root: Path, sink: str) -> list[dict]:
    """Every message of a sink's data files, in emission order."""
    return [m for f in read_sink(sink_dir(root, sink)) if not f.resolved for m in f.lines]


def hlc(text: str) -> tuple[int, int]:
    assert HLC.match(text), text
    wall, logical = text.split(".")
    return int(wall), int(logical)


def ts33_hlc(text: str) -> tuple[int, int]:
    from feedctl.sinks.naming import parse_ts33

    ts = parse_ts33(text)
    return ts.wall, ts.logical


# --- tables and the oracle ---------------------------------------------------------------------------


class Table:
    """A Delta table with change data feed on, changed the ways users change tables."""

    def __init__(self, path: Path, columns: dict[str, str], key: list[str], rows: list[dict] | None = None, **create):
        self.path, self.key = path, key
        write_delta(path, columns, rows, **create)

    def dt(self, version: int | None = None):
        from deltalake import DeltaTable

        return DeltaTable(str(self.path), version=version)

    @property
    def version(self) -> int:
        return self.dt().version()

    def append(self, rows: list[dict]) -> int:
        from deltalake import write_deltalake

        schema = pa.schema(self.dt().schema().to_arrow())
        write_deltalake(str(self.path), pa.Table.from_pylist(rows, schema=schema), mode="append")
        return self.version

    def overwrite(self, rows: list[dict]) -> int:
        from deltalake import write_deltalake

        schema = pa.schema(self.dt().schema().to_arrow())
        write_deltalake(str(self.path), pa.Table.from_pylist(rows, schema=schema), mode="overwrite")
        return self.version

    def update(self, predicate: str, **sql_values: str) -> int:
        self.dt().update(predicate=predicate, updates=sql_values)
        return self.version

    def delete(self, predicate: str) -> int:
        self.dt().delete(predicate)
        return self.version

    def snapshot(self, version: int) -> dict[tuple, dict]:
        rows = pa.table(self.dt(version).to_pyarrow_dataset().to_table()).to_pylist()
        out = {tuple(r[k] for k in self.key): r for r in rows}
        assert len(out) == len(rows), f"duplicate keys at version {version}"
        return out

    def commit_ns(self, version: int) -> int:
        entry = [h for h in self.dt().history() if h["version"] == version][0]
        return int(entry.get("inCommitTimestamp") or entry["timestamp"]) * 1_000_000

    def changes(self, after: int, up_to: int | None = None) -> list[tuple[int, tuple, dict | None, dict | None]]:
        """(version, key, before, after) of every key whose row differs between consecutive versions."""
        up_to = self.version if up_to is None else up_to
        out, prev = [], self.snapshot(after)
        for version in range(after + 1, up_to + 1):
            now = self.snapshot(version)
            for key in sorted(set(prev) | set(now), key=repr):
                if prev.get(key) != now.get(key):
                    out.append((version, key, prev.get(key), now.get(key)))
            prev = now
        return out


# Rows 1..60 of columns id, name, n, changed by `churn`: 10 updates, 5 deletes, 5 inserts, 3 more updates.
CHURN_ROWS = [{"id": i, "name": f"r{i}", "n": i} for i in range(1, 61)]
CHURN_CHANGES = 10 + 5 + 5 + 3


def churn(table: Table) -> None:
    table.update("id <= 10", n="n + 100")
    table.delete("id > 55")
    table.append([{"id": 100 + i, "name": f"new{i}", "n": i} for i in range(5)])
    table.update("id <= 3", n="n + 1")


def check_changes(emitted: list[dict], expected: list[tuple], table: Table) -> dict[int, tuple[int, int]]:
    """The guarantees of wrapped messages with `updated`: returns each version's event timestamp.

    - every expected (version, key) state appears, with its after (and before, when present);
    - all keys of one commit share one `updated`, later commits have later ones, not before the commit;
    - per key, first emissions come in commit order; nothing is emitted that no commit made."""
    by_key_ts: dict[tuple, dict] = {}
    first_seen: list[tuple[tuple, tuple[int, int]]] = []
    for m in emitted:
        key, ts = tuple(m["key"]), hlc(m["updated"])
        if (key, ts) in by_key_ts:
            assert by_key_ts[(key, ts)] == m, f"two different messages for {key} at {ts}"
            continue
        by_key_ts[(key, ts)] = m
        first_seen.append((key, ts))
    version_ts: dict[int, tuple[int, int]] = {}
    for version, key, before, after in expected:
        matches = [
            (ts, m)
            for (k, ts), m in by_key_ts.items()
            if k == key and m["after"] == after and ("before" not in m or m["before"] == before)
        ]
        assert matches, f"version {version}: no message for {key} with after={after} before={before}"
        if version in version_ts:
            assert version_ts[version] in [ts for ts, _ in matches], f"version {version}: keys differ in updated"
        else:
            candidates = [ts for ts, _ in matches if not version_ts or ts > max(version_ts.values())]
            assert candidates, f"version {version}: updated not after the previous commit's"
            version_ts[version] = min(candidates)
            assert version_ts[version][0] >= table.commit_ns(version)
    assert len(by_key_ts) == len(expected), "a message that no commit made"
    last: dict[tuple, tuple[int, int]] = {}
    for key, ts in first_seen:
        assert key not in last or ts > last[key], f"{key}: {ts} first emitted after {last[key]}"
        last[key] = ts
    return version_ts
