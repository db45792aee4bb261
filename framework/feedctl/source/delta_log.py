"""The Delta log of one table, read per the protocol: the actions of a commit, and the data files of a
version (the newest complete checkpoint at or before it, classic, multi-part or v2 with its sidecars, then
the commits after it).

delta-rs answers what it answers for every table (versions, history, schemas); the files of a version
are read here because its file listings carry no deletion vectors, and its readers refuse whole tables
over one feature (`vacuumProtocolCheck`, type widening) that changes nothing in how their files are read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow.parquet as pq

from feedctl.source.deletion_vector import Descriptor
from feedctl.source.table_store import TableStore

LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10})|\.([0-9a-fA-F-]{36}))?\.(parquet|json)$")


class LogError(Exception):
    """The log cannot give a version: its commits are gone, or a file of it cannot be read."""


class FileGone(LogError):
    """A file of the log is no longer there (cleaned up once a checkpoint holds it)."""


@dataclass(frozen=True)
class DataFile:
    """An `add` (or `remove`) action: one logical file of the table."""

    path: str  # as the log names it (URL-encoded)
    partition_values: dict  # partition column (physical name) -> its serialized value, None for null
    size: int
    num_records: int | None
    stats: str | None  # the action's statistics, JSON
    deletion_vector: Descriptor | None
    data_change: bool = True

    @property
    def key(self) -> tuple[str, str | None]:
        """The protocol's key for reconciling actions: the path and the deletion vector's id."""
        return self.path, self.deletion_vector.unique_id if self.deletion_vector else None

    @classmethod
    def of(cls, action: dict) -> DataFile:
        stats = action.get("stats")
        records = None
        if stats:
            try:
                records = json.loads(stats).get("numRecords")
            except ValueError:
                records = None
        return cls(
            action["path"],
            dict(action.get("partitionValues") or {}),
            int(action.get("size") or 0),
            records,
            stats,
            Descriptor.of(action.get("deletionVector")),
            bool(action.get("dataChange", True)),
        )


class CommitInfo(NamedTuple):
    info: dict  # its `commitInfo`
    # The in-commit timestamp where the table has them, else the writer's `timestamp`, else (a writer that gave
    # none) the file's modification time, which is what the protocol calls the commit's time; in nanoseconds.
    commit_ns: int
    change_files: bool  # it wrote change data files
    metadata: bool  # it changed the table's metadata, where its schema is: no other commit changes the schema


@dataclass(frozen=True)
class Commit:
    """The actions of one version."""

    version: int
    adds: list[DataFile]
    removes: list[DataFile]
    cdc: list[DataFile]  # change data files: when present, they are the version's changes
    info: dict  # commitInfo
    configuration: dict | None = None  # the table's properties, when the commit changes its metadata

    @property
    def rewrites(self) -> bool:
        """Whether the commit removed files and added others as changes: it may carry rows over unchanged."""
        return any(f.data_change for f in self.removes) and any(f.data_change for f in self.adds)


def commit_path(version: int) -> str:
    """A commit's file, relative to the table's root."""
    return f"{LOG}/{version:020d}.json"


class DeltaLog:
    def __init__(self, store: TableStore):
        self.store = store

    def commit(self, version: int) -> Commit:
        adds, removes, cdc, info, configuration = [], [], [], {}, None
        for action in self._actions(commit_path(version), f"version {version}"):
            if "add" in action:
                adds.append(DataFile.of(action["add"]))
            elif "remove" in action:
                removes.append(DataFile.of(action["remove"]))
            elif "cdc" in action:
                cdc.append(DataFile.of(action["cdc"]))
            elif "commitInfo" in action:
                info = action["commitInfo"] or {}
            elif "metaData" in action:
                configuration = (action["metaData"] or {}).get("configuration") or {}
        return Commit(version, adds, removes, cdc, info, configuration)

    def info(self, version: int) -> CommitInfo:
        """What a commit says of itself, without its files (`CommitInfo`)."""
        path = commit_path(version)
        found = self._actions(path, f"version {version}", only=("commitInfo", "cdc", "metaData"))
        info = next((a["commitInfo"] for a in found if "commitInfo" in a), None) or {}
        millis = info.get("inCommitTimestamp") or info.get("timestamp")
        return CommitInfo(
            info,
            int(millis) * 1_000_000 if millis else self.store.modified(path),
            any("cdc" in a for a in found),
            any("metaData" in a for a in found),
        )

    def files(self, version: int) -> list[DataFile]:
        """The data files of the table at `version`, in the order of their paths."""
        names = self.store.names(LOG)
        checkpoint, parts = _newest_checkpoint(names, version)
        commits = {int(m.group(1)) for m in map(_COMMIT.match, names) if m}
        first = checkpoint + 1
        missing = [v for v in range(first, version + 1) if v not in commits]
        if missing:
            raise LogError(
                f"versions {missing[0]}..{missing[-1]} are no longer in the log (cleaned up)"
                if first
                else f"the log has no checkpoint at or before version {version} and no commit {missing[0]}"
            )
        live: dict[tuple, DataFile] = {}
        for part in parts:
            for action in self._checkpoint(part):
                if action.get("add"):
                    f = DataFile.of(action["add"])
                    live[f.key] = f
        for v in range(first, version + 1):
            commit = self.commit(v)
            for f in commit.removes:
                live.pop(f.key, None)
            for f in commit.adds:
                live[f.key] = f
        return sorted(live.values(), key=lambda f: f.key)

    def newest_protocol(self) -> tuple[int, dict]:
        """The newest version and the table's protocol there (its newest `protocol` action), read from the log
        alone: what a table asks of its readers is told in feedctl's words, whether or not delta-rs opens it."""
        names = self.store.names(LOG)
        commits = sorted((int(m.group(1)) for m in map(_COMMIT.match, names) if m), reverse=True)
        if not commits:
            raise LogError("the log holds no commit")
        checkpoint, parts = _newest_checkpoint(names, commits[0])
        for version in (v for v in commits if v > checkpoint):
            found = self._actions(commit_path(version), f"version {version}", only=("protocol",))
            if found:
                return commits[0], found[-1]["protocol"]
        for part in parts:
            path = f"{LOG}/{part}"
            actions = (
                self._actions(path, part, only=("protocol",))
                if part.endswith(".json")
                else _parquet_protocol(self.store, path)
            )
            for action in actions:
                return commits[0], action["protocol"]
        raise LogError(f"no protocol action at or before version {commits[0]}")

    def _checkpoint(self, name: str):
        """The actions of a checkpoint file, and of the sidecars a v2 checkpoint names."""
        path = f"{LOG}/{name}"
        actions = self._actions(path, name) if name.endswith(".json") else _parquet_actions(self.store, path)
        for action in actions:
            sidecar = action.get("sidecar")
            if sidecar:
                yield from _parquet_actions(self.store, f"{LOG}/_sidecars/{sidecar['path']}")
            else:
                yield action

    def _actions(self, path: str, what: str, only: tuple[str, ...] | None = None) -> list[dict]:
        """The actions of a JSON log file; with `only`, those of these kinds alone (the other lines are not
        parsed: a commit may add thousands of files)."""
        try:
            text = self.store.read(path).decode("utf-8")
        except FileNotFoundError:
            raise FileGone(f"{what} is no longer in the log (cleaned up)") from None
        lines = [
            line for line in text.splitlines() if line.strip() and (only is None or any(f'"{k}"' in line for k in only))
        ]
        try:
            actions = [json.loads(line) for line in lines]
        except ValueError as exc:
            raise LogError(f"{what} of the log is not valid JSON: {exc}") from None
        return actions if only is None else [a for a in actions if any(k in a for k in only)]


def _newest_checkpoint(names: list[str], version: int) -> tuple[int, list[str]]:
    """The newest complete checkpoint at or before `version` and its files, or (-1, [])."""
    found: dict[int, dict] = {}
    for name in names:
        m = _CHECKPOINT.match(name)
        if not m or int(m.group(1)) > version:
            continue
        at = found.setdefault(int(m.group(1)), {"single": [], "parts": {}, "v2": []})
        if m.group(4):
            at["v2"].append(name)
        elif m.group(2):
            at["parts"].setdefault(int(m.group(3)), {})[int(m.group(2))] = name
        else:
            at["single"].append(name)
    for v in sorted(found, reverse=True):
        at = found[v]
        if at["v2"]:
            return v, sorted(at["v2"])[:1]
        if at["single"]:
            return v, at["single"][:1]
        for count, parts in at["parts"].items():
            if len(parts) == count:  # a multi-part checkpoint is usable only whole
                return v, [parts[i] for i in sorted(parts)]
    return -1, []


_ACTION_COLUMNS = ("add", "sidecar")


def _parquet_actions(store: TableStore, path: str):
    """`add` and `sidecar` actions of a checkpoint (or sidecar) in Parquet, as the JSON log would hold them."""
    try:
        handle = store.open(path)
    except FileNotFoundError:
        raise LogError(f"checkpoint file {path} is gone") from None
    with handle:
        parquet = pq.ParquetFile(handle)
        columns = [c for c in _ACTION_COLUMNS if c in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(columns=columns):
            for row in batch.to_pylist():
                for column in columns:
                    value = row.get(column)
                    if value and value.get("path") is not None:
                        if column == "add" and isinstance(value.get("partitionValues"), list):
                            value["partitionValues"] = dict(value["partitionValues"])
                        yield {column: value}


def _parquet_protocol(store: TableStore, path: str):
    """The `protocol` action of a checkpoint in Parquet."""
    with store.open(path) as handle:
        parquet = pq.ParquetFile(handle)
        if "protocol" not in parquet.schema_arrow.names:
            return
        for batch in parquet.iter_batches(columns=["protocol"]):
            for value in batch.column(0).to_pylist():
                if value and value.get("minReaderVersion") is not None:
                    yield {"protocol": value}
