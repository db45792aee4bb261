"""Partial compilation, as dbt's partial parsing: a CDC query compiled once is not rendered and parsed
again while nothing it depends on changed. `target/partial_compile.pickle` keeps, per feed, what its query
compiled to, under a key over everything that could change it: feedctl's version, project.yml (tables, keys,
vars), every macro file, the query file, --vars, the feed's options, and how compile was asked to check
columns; and beside it the schema of the table the query reads, compared with the table as compile finds it.

Only a query that compiled without a problem is kept, and never one that read an environment variable: its
rendering may hold a secret, which nothing under target/ may.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

from feedctl import __version__
from feedctl.compiler.table_schema import TableSchema
from feedctl.options import Options
from feedctl.project.model import FeedDef, Project

FILE = "target/partial_compile.pickle"
_FORMAT = 1  # of the file: a feedctl whose entries differ in shape changes it


def _signature(schema: TableSchema | None):
    return None if schema is None else (schema.columns, schema.partition_columns, schema.types)


class PartialCompile:
    def __init__(self, project: Project, vars_override: dict | None, check_tables: bool, lenient_columns: bool):
        self.root = project.root
        digest = hashlib.sha256(
            json.dumps(
                [_FORMAT, __version__, vars_override, check_tables, lenient_columns], sort_keys=True, default=str
            ).encode()
        )
        for path in [self.root / "project.yml", *sorted(self.root / m for m in project.macro_files)]:
            digest.update(str(path).encode() + b"\0" + _read(path) + b"\0")
        self.base = digest.hexdigest()
        self.kept = self._load()
        self.now: dict[str, tuple] = {}
        self.hits = 0

    def key(self, feed: FeedDef, options: Options) -> str:
        digest = hashlib.sha256(self.base.encode())
        digest.update(json.dumps([feed.query_file, options.to_json()], sort_keys=True, default=str).encode())
        digest.update(_read(self.root / feed.query_file))
        return digest.hexdigest()

    def get(self, feed: FeedDef, key: str, table_schema) -> tuple | None:
        """What the feed's query compiled to when its key was `key` and its table's schema as now:
        (table, sql, columns, pushdown, column sites, schema checked); None when not kept."""
        entry = self.kept.get(feed.name)
        if entry is None or entry[0] != key or _signature(table_schema(entry[1][0])) != entry[2]:
            return None
        self.now[feed.name] = entry
        self.hits += 1
        return entry[1]

    def put(self, feed: FeedDef, key: str, compiled: tuple, schema: TableSchema | None) -> None:
        self.now[feed.name] = (key, compiled, _signature(schema))

    def save(self) -> None:
        """Written whole, then moved into place: a node compiling beside another reads one or the other."""
        if self.now.keys() == self.kept.keys() and all(self.now[f][0] == self.kept[f][0] for f in self.now):
            return  # as kept
        path = self.root / FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.{os.getpid()}")
            temporary.write_bytes(pickle.dumps(self.now, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(temporary, path)
        except OSError:  # a project folder this process cannot write: compile as before, every time
            pass

    def _load(self) -> dict:
        try:
            kept = pickle.loads((self.root / FILE).read_bytes())
        except Exception:  # none yet, unreadable, or of another shape: compile every query
            return {}
        return kept if isinstance(kept, dict) else {}


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
