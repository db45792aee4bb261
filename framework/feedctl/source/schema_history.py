"""A table's schema at each version, as one source handle reads it (`DeltaSource.schema`), and where it
changes. A version's schema never changes, so each is read once. The schema is the table's metadata: a version
after commits that change none has the schema of the version before them, carried forward over at most
`CARRIED` commits at the cost of their log files rather than of loading the version's snapshot; and a range of
versions whose commits, as read already, change no metadata holds no schema change. Elsewhere a change is
found by bisection, so a range without one costs two schemas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import pyarrow as pa

from feedctl.errors import TerminalError
from feedctl.source import schema_change
from feedctl.source.schema_change import SchemaChange


class Commit(Protocol):  # what it reads of a commit (`delta.Commit`)
    metadata: bool  # the commit changed the table's metadata
    rewrote: bool  # it rewrote existing rows


CARRIED = 64  # versions a schema known is carried forward over, at most, by reading their commits


class SchemaHistory:
    def __init__(
        self,
        table: str,
        load: Callable[[int], pa.Schema],
        commits: Callable[[int, int], list[Commit]],
        read: Callable[[int], Commit | None],
    ):
        """`load`: a version's schema from its snapshot; `commits`: the commits of a range, read from the log;
        `read`: a commit if the handle has read it already."""
        self.table, self._load, self._commits, self._read = table, load, commits, read
        self._schemas: dict[int, pa.Schema] = {}
        self._newest = -1  # the newest version in `_schemas`
        self._changes: dict[int, SchemaChange] = {}

    def at(self, version: int) -> pa.Schema:
        if version not in self._schemas and not self._carried(self._newest, version):
            self._known(version, self._load(version))
        return self._schemas[version]

    def changes(self, after_version: int, up_to: int) -> list[int]:
        """The versions in (after_version, up_to] whose schema differs from the version before: a batch holds
        versions of one schema."""
        changes, low = [], max(after_version, 0)
        read = range(low + 1, up_to + 1)
        if read and all((c := self._read(v)) is not None and not c.metadata for v in read):
            if low in self._schemas:  # the newest version's schema is then known too, without reading it
                self._known(up_to, self._schemas[low])
            return []
        while low < up_to and self.at(low) != self.at(up_to):
            lo, hi = low, up_to  # at(lo) == at(low) != at(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if self.at(mid) == self.at(low) else (lo, mid)
            changes.append(hi)
            low = hi
        return changes

    def change(self, version: int) -> SchemaChange:
        """How `version` changed the schema of the version before it. With column mapping, a rename is a
        column dropped and one added."""
        if version not in self._changes:  # a version's change never changes
            self._changes[version] = schema_change.between(
                self.table,
                version,
                self.at(version - 1),
                self.at(version),
                self._commits(version - 1, version)[0].rewrote,
            )
        return self._changes[version]

    def _carried(self, known: int, version: int) -> bool:
        """Whether `version` has the schema of the version `known` (already read, and at most `CARRIED` older)
        because no commit between them changed the table's metadata: then recorded. A commit not to be read
        says nothing here: the version is then loaded."""
        if known not in self._schemas or not 0 < version - known <= CARRIED:
            return False
        try:
            if any(c.metadata for c in self._commits(known, version)):
                return False
        except TerminalError:
            return False
        self._known(version, self._schemas[known])
        return True

    def _known(self, version: int, schema: pa.Schema) -> None:
        self._schemas[version] = schema
        self._newest = max(self._newest, version)
