"""Tables added to or dropped from a running plain feed (CockroachDB's `ALTER CHANGEFEED ... ADD/DROP`). The
job keeps its id and high-water mark. An added table is followed from its version when it was added; under
`initial_scan: yes` it is first scanned alone at that version, in a batch of its own whose event timestamp is
above everything the job cut before (`scan_at`, set by the coordinator when it cuts that batch), so nothing
emitted for it sorts below a resolved timestamp already written. A dropped table is emitted no more: its
batches already cut are emitted, then its spans go.

A change is `{"table", "op": "added" | "dropped", "version", "scan", "scan_at"}` in the job's definition
(`table_changes`), oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from feedctl.units import Hlc


class Rejoin(Exception):
    """The job reads a table this node's runner has no source for (added by another node's `run`): the
    runner starts again, as a node restarted would, and takes it from its project.yml."""


@dataclass(frozen=True)
class TableChange:
    table: str
    op: str  # added | dropped
    version: int  # added: the version it is followed from (and scanned at); dropped: -1
    scan: bool = False  # added under initial_scan: yes
    scan_at: Hlc | None = None  # the event timestamp of its scan, once the batch is cut

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "op": self.op,
            "version": self.version,
            "scan": self.scan,
            "scan_at": [self.scan_at.wall, self.scan_at.logical] if self.scan_at else None,
        }

    @staticmethod
    def from_json(d: dict) -> "TableChange":
        return TableChange(
            d["table"], d["op"], d["version"], d.get("scan", False), Hlc(*d["scan_at"]) if d.get("scan_at") else None
        )

    def describe(self) -> str:
        if self.op == "dropped":
            return f"{self.table} dropped: no longer emitted"
        return f"{self.table} added at version {self.version}" + (", scanned alone first" if self.scan else "")


def recorded(definition: dict) -> list[TableChange]:
    return [TableChange.from_json(d) for d in definition.get("table_changes", ())]


def with_changes(definition: dict, tables: list[str], changes: list[TableChange]) -> dict:
    return {
        **definition,
        "tables": tables,
        "table_changes": [*definition.get("table_changes", ()), *(c.to_json() for c in changes)],
    }


def unscanned(definition: dict) -> list[TableChange]:
    """Added tables whose scan is not yet cut."""
    return [c for c in recorded(definition) if c.op == "added" and c.scan and c.scan_at is None]


def scanned(definition: dict, table: str, at: Hlc) -> dict:
    """The definition once the scan of added `table` is cut, at event timestamp `at`."""
    changes = [
        replace(c, scan_at=at) if c.op == "added" and c.table == table and c.scan_at is None and c.scan else c
        for c in recorded(definition)
    ]
    return {**definition, "table_changes": [c.to_json() for c in changes]}


def ever(definition: dict) -> list[str]:
    """Every table the job emitted at some point: those it reads now and those dropped since."""
    dropped = [c.table for c in recorded(definition) if c.op == "dropped"]
    return list(dict.fromkeys([*definition["tables"], *dropped]))


def check_sources(definition: dict, sources) -> None:
    """Raise Rejoin when the job has a table this node has no source for."""
    missing = [t for t in ever(definition) if t not in sources]
    if missing:
        raise Rejoin(f"the job reads {', '.join(missing)} now")
