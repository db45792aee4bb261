"""A change of a table's schema from one version to the next, classified as CockroachDB's schema feed does
(reference §8), and whether a feed reacts to it.

Delta gives existing rows no value when a column is added (they read as null), unless the column has a
default (the column-defaults feature), is generated, or the commit that adds it rewrites the rows (an
overwrite with the new schema, say): only then is the column "added with a value" in CockroachDB's sense.
A column is dropped without column mapping by rewriting the table without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from feedctl.options import Options, SchemaChangeAction

# Field metadata of a column with a value for rows that do not set it: a default, a generated column.
_VALUED = ("CURRENT_DEFAULT", "delta.generationExpression")


@dataclass(frozen=True)
class SchemaChange:
    table: str
    version: int
    added: tuple[str, ...] = ()
    filled: tuple[str, ...] = ()  # the added columns existing rows have a value in
    dropped: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()  # type widened
    nullable: tuple[str, ...] = ()  # nullability changed

    def is_event(self, events: str, read: list[str] | None = None) -> bool:
        """Whether a feed with `schema_change_events: events` reading the columns `read` (None: every
        column, so every added one too) reacts: `default` to added columns with a value and to dropped ones,
        `column_changes` to every added or dropped column."""
        added = self.added if events == "column_changes" else self.filled
        return any(read is None or c in read for c in added) or any(read is None or c in read for c in self.dropped)

    def describe(self) -> str:
        parts = [
            f"column {c} added" + (" with a value for existing rows" if c in self.filled else "") for c in self.added
        ]
        parts += [f"column {c} dropped" for c in self.dropped]
        parts += [f"column {c} type widened" for c in self.retyped]
        parts += [f"column {c} nullability changed" for c in self.nullable]
        return f"{self.table} version {self.version}: " + (", ".join(parts) or "schema metadata changed")


def between(table: str, version: int, before: pa.Schema, after: pa.Schema, rewrote: bool) -> SchemaChange:
    """The change from `before` to `after`, made by `version`; `rewrote`: the commit rewrote existing rows."""
    old = {f.name: f for f in before}
    added = tuple(f.name for f in after if f.name not in old)
    filled = tuple(c for c in added if rewrote or any(k.decode() in _VALUED for k in (after.field(c).metadata or {})))
    kept = [f for f in after if f.name in old]
    return SchemaChange(
        table,
        version,
        added,
        filled,
        tuple(c for c in old if c not in after.names),
        tuple(f.name for f in kept if f.type != old[f.name].type),
        tuple(f.name for f in kept if f.nullable != old[f.name].nullable),
    )


def read_dropped(change: SchemaChange, read: list[str] | None) -> list[str]:
    """The dropped columns a feed's query names (`read`; None: a feed without one, or `SELECT *`)."""
    named = {c.lower() for c in read or ()}
    return [c for c in change.dropped if c.lower() in named]


def action(change: SchemaChange, options: Options, read: list[str] | None) -> SchemaChangeAction:
    """What a feed does at `change`: `fail` when its query names a dropped column (it cannot run past it),
    else its `schema_change_policy`, or `none` when the change is no event for it."""
    if read_dropped(change, read):
        return SchemaChangeAction.FAIL
    if not change.is_event(options.schema_change_events, read):
        return SchemaChangeAction.NONE
    return options.schema_change_policy.action
