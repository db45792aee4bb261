"""What a table's schema change, seen before it lands (a `schemas.yml` changed in a pull request, against the
deployed build), will do to a feed's job under its `schema_change_policy`: the same decision the job takes
when it reaches the version (`source/schema_change.py`), said in advance.

Only column names and types are known here: a column added is taken as added without a value for existing
rows (a default or a rewrite of the table would make it one with), as a `schemas.yml` cannot tell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from feedctl.options import Options
from feedctl.source import schema_change

EFFECTS = {
    "backfill": "every row of the table emitted again at the change",
    "nobackfill": "no message for the change itself; changes after it carry the new columns",
    "stop": "the job stops at the change; a new job with its cursor continues",
    "fail": "the job stops before the change: its query reads a dropped column",
    "none": "nothing: no schema change event for this feed",
}


@dataclass(frozen=True)
class SchemaEffect:
    table: str
    change: schema_change.SchemaChange
    action: str  # a key of EFFECTS
    rows: int | None = None  # a backfill's rows, where the table could be read (its log's statistics)

    def describe(self) -> str:
        what = self.change.describe().split(": ", 1)[1]
        size = f" (about {self.rows:,} rows now)" if self.rows is not None else ""
        return f"{self.table} schema: {what} → {self.action}: {EFFECTS[self.action]}{size}"


def effect(
    table: str, before: dict[str, object], after: dict[str, object], options: Options, read: list[str] | None
) -> SchemaEffect | None:
    """The effect on a feed (its `options`, the columns its query reads: None, all) of a table going from
    the columns and types `before` to `after` (column -> Delta type); None when they are the same."""
    if list(before) == list(after) and all(_same(before[c], after[c]) for c in before):
        return None
    kept = [c for c in after if c in before]
    change = schema_change.SchemaChange(
        table,
        -1,
        added=tuple(c for c in after if c not in before),
        dropped=tuple(c for c in before if c not in after),
        retyped=tuple(c for c in kept if not _same(before[c], after[c])),
    )
    return SchemaEffect(table, change, schema_change.action(change, options, read))


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
