"""Tables added to or dropped from a running plain feed (CockroachDB's `ALTER CHANGEFEED ... ADD/DROP`). The
job keeps its id and high-water mark. An added table is followed from its version when it was added; under
`initial_scan: yes` it is first scanned alone at that version, in a batch of its own whose event timestamp is
above everything the job cut before (`scan_at`, set by the coordinator when it cuts that batch), so nothing
emitted for it sorts below a resolved timestamp already written. A dropped table is emitted no more: its
batches already cut are emitted, then its spans go.

The job's definition keeps its changes oldest first (`JobDefinition.table_changes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from feedctl.units import Hlc


class Rejoin(Exception):
    """The job reads a table this node's runner has no source for (added by another node's `run`): the
    runner starts again, as a node restarted would, and takes it from its project.yml."""


class TableOp(StrEnum):
    ADDED = "added"
    DROPPED = "dropped"


@dataclass(frozen=True)
class TableChange:
    table: str
    op: TableOp
    version: int  # added: the version it is followed from (and scanned at); dropped: -1
    scan: bool = False  # added under initial_scan: yes
    scan_at: Hlc | None = None  # the event timestamp of its scan, once the batch is cut

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "op": self.op.value,
            "version": self.version,
            "scan": self.scan,
            "scan_at": [self.scan_at.wall, self.scan_at.logical] if self.scan_at else None,
        }

    @staticmethod
    def from_json(d: dict) -> "TableChange":
        return TableChange(
            d["table"],
            TableOp(d["op"]),
            d["version"],
            d.get("scan", False),
            Hlc(*d["scan_at"]) if d.get("scan_at") else None,
        )

    def describe(self) -> str:
        if self.op == TableOp.DROPPED:
            return f"{self.table} dropped: no longer emitted"
        return f"{self.table} added at version {self.version}" + (", scanned alone first" if self.scan else "")


def check_sources(definition, sources) -> None:
    """Raise Rejoin when the job (a `JobDefinition`) has a table this node has no source for."""
    missing = [t for t in definition.tables_ever() if t not in sources]
    if missing:
        raise Rejoin(f"the job reads {', '.join(missing)} now")
