"""What a batch emits of a table at the version that changed its schema: the version's own row changes,
less the rows the change itself rewrote (a row whose columns of both schemas are as they were is no change:
its new column's value, or its dropped column, is the schema change, not a change of the row). Under
`schema_change_policy: backfill`, every row of the table at that version instead, as a scan at the change's
timestamp, and the version's deletes: each key has one message there, the row as of the change (with no
`before`, as a scan's) or its delete."""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.source.snapshot import SnapshotScan
from feedctl.source.stage import StagedSpans


@dataclass(frozen=True)
class AtSchemaChange:
    """Plain values only: it travels to the executors inside the task closure."""

    changes: StagedSpans | None  # None: the version changed no row (an added column, say)
    compared: list[str]  # the columns of both schemas: a rewritten row unchanged in them is no change
    backfill: SnapshotScan | None  # the table at the change, under `backfill`
