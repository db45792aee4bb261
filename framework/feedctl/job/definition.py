"""A job's definition, typed: what it emits (tables, query, options, sink) and the history of what it took in
place since it was created (options, tables, a table's key), so that what holds for any batch can be told
from the job alone, on any node (CockroachDB's `ChangefeedDetails`). Stored as JSON on the job
(`state/jobs.py`); definitions stored by earlier versions read the same, missing what they did not record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache

from feedctl.job.key_change import Key, KeyChange
from feedctl.job.option_change import OptionChange
from feedctl.job.table_change import TableChange, TableOp
from feedctl.options import Options
from feedctl.units import Hlc


@dataclass(frozen=True)
class JobDefinition:
    tables: tuple[str, ...]  # those it emits now: not those dropped since
    sql: str | None
    # The options in force now, every one of them (a definition stored before an option existed reads its
    # default). Never changed in place: `with_option_change` makes a new definition.
    options: Options
    sink: str
    columns: dict | None = None  # per table, the columns the query names
    keys: dict[str, Key] = field(default_factory=dict)  # per table, the key it is emitted under now
    sink_display: dict | None = None  # the sink's settings, redacted: what `feedctl plan` compares with
    metadata: dict | None = None  # description, tags, meta
    view: str | None = None  # the copy of the project its revision was taken from (`job/rollout.py`)
    view_since: int = 0  # the store's sequence number when it took its revision (0: not kept then)
    revision: int = 1  # 1 as created, one more for each change of the project it took in place
    option_changes: tuple[OptionChange, ...] = ()
    table_changes: tuple[TableChange, ...] = ()
    key_changes: tuple[KeyChange, ...] = ()

    # -- what holds when -----------------------------------------------------------------------------

    def options_at(self, batch_seq: int) -> Options:
        """The options batch `batch_seq` is emitted under: the job's, less the changes made after it was cut.
        (verify tells a message's options by its event timestamp and each change's `after`: `MessageSpec.at`.)"""
        options = self.options
        for change in reversed(self.option_changes):
            if batch_seq < change.from_batch:
                options = options.with_values(change.was)
        return options

    def keys_in_force(self, declared: dict[str, Key]) -> dict[str, Key]:
        """Each of `declared`'s tables' key as the job emits it now: as recorded in the job, else (a job
        created before keys were recorded) as project.yml declares it."""
        return {t: self.keys.get(t, key) for t, key in declared.items()}

    def key_left(self, table: str, key: Key) -> KeyChange | None:
        """The change that left `key` behind, when the job had it before: a node reading an older project.yml."""
        return next((c for c in self.key_changes if c.table == table and c.before == key), None)

    def tables_ever(self) -> list[str]:
        """Every table the job emitted at some point: those it emits now and those dropped since."""
        dropped = [c.table for c in self.table_changes if c.op == TableOp.DROPPED]
        return list(dict.fromkeys([*self.tables, *dropped]))

    def unscanned(self) -> list[TableChange]:
        """Added tables whose scan is not yet cut."""
        return [c for c in self.table_changes if c.op == TableOp.ADDED and c.scan and c.scan_at is None]

    # -- what it becomes -----------------------------------------------------------------------------

    def with_option_change(self, change: OptionChange) -> JobDefinition:
        return replace(
            self, options=self.options.with_values(change.now), option_changes=(*self.option_changes, change)
        )

    def with_table_changes(self, tables: list[str], changes: list[TableChange], keys: dict[str, Key]) -> JobDefinition:
        """`tables` emitted from now on, after `changes`; `keys`: those of the tables added."""
        return replace(
            self,
            tables=tuple(tables),
            table_changes=(*self.table_changes, *changes),
            keys={**self.keys, **keys},
        )

    def with_scan(self, table: str, at: Hlc) -> JobDefinition:
        """Once the scan of added `table` is cut, at event timestamp `at`."""
        changes = tuple(
            replace(c, scan_at=at) if c.op == TableOp.ADDED and c.table == table and c.scan and c.scan_at is None else c
            for c in self.table_changes
        )
        return replace(self, table_changes=changes)

    def with_key_change(self, change: KeyChange) -> JobDefinition:
        """Once it emits `change.table` under the new key."""
        return replace(self, keys={**self.keys, change.table: change.after}, key_changes=(*self.key_changes, change))

    def revised(self, metadata: dict, view: str, view_since: int) -> JobDefinition:
        """Its next revision, taken from a copy of the project whose view is `view`."""
        return replace(self, metadata=metadata, view=view, view_since=view_since, revision=self.revision + 1)

    # -- stored ------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "tables": list(self.tables),
            "sql": self.sql,
            "options": self.options.to_json(),
            "sink": self.sink,
            "columns": self.columns,
            "keys": {t: k.to_json() for t, k in self.keys.items()},
            "sink_display": self.sink_display,
            "metadata": self.metadata,
            "view": self.view,
            "view_since": self.view_since,
            "revision": self.revision,
            "option_changes": [c.to_json() for c in self.option_changes],
            "table_changes": [c.to_json() for c in self.table_changes],
            "key_changes": [c.to_json() for c in self.key_changes],
        }

    @staticmethod
    def from_json(d: dict) -> JobDefinition:
        return JobDefinition(
            tables=tuple(d["tables"]),
            sql=d.get("sql"),
            # an option the job did not record (it did not exist then) at its default
            options=Options.from_json(d["options"], d.get("sql") is not None),
            sink=d["sink"],
            columns=d.get("columns"),
            keys={t: Key.from_json(k) for t, k in (d.get("keys") or {}).items()},
            sink_display=d.get("sink_display"),
            metadata=d.get("metadata"),
            view=d.get("view"),
            view_since=d.get("view_since", 0),
            revision=d.get("revision", 1),
            option_changes=tuple(OptionChange.from_json(c) for c in d.get("option_changes", ())),
            table_changes=tuple(TableChange.from_json(c) for c in d.get("table_changes", ())),
            key_changes=tuple(KeyChange.from_json(c) for c in d.get("key_changes", ())),
        )


def definition_of(job) -> JobDefinition:
    """The definition of a job row (`state.jobs.Job`), decoded from what the store holds."""
    return _decoded(job.definition_json)


@lru_cache(maxsize=4096)
def _decoded(stored: str) -> JobDefinition:
    """A stored definition, parsed once: a node reads its jobs' rows many times a second, and a definition
    changes only when the job takes a revision (a new text). Frozen, and never changed in place: shared."""
    return JobDefinition.from_json(json.loads(stored))
