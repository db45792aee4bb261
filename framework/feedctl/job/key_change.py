"""A table's primary key or region column changed in project.yml under a running job: a table made regional
by row (`[id]` → `[crdb_region, id]`, region column `crdb_region`), the seed's case. CockroachDB takes such a
conversion as a schema change; so does a job here, at the version from which the table has every column of
the new key (the version that added them, or, when the job had passed that version when project.yml changed,
the table's next version). The job records each change of a table's key, and emits the versions before it
under the old key and the rest under the new one.

In the version that adds the new key's columns, a row's before image lacks them (`source/key_fill.py`).

A key is `{"primary_key": [...], "region_column": name or None}`, as the job's definition records it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeyChange:
    table: str
    version: int  # the first version emitted under `after`
    before: dict
    after: dict
    filled: tuple[str, ...] = ()  # the new key's columns the version added: before images take them from after

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "version": self.version,
            "before": self.before,
            "after": self.after,
            "filled": list(self.filled),
        }

    @staticmethod
    def from_json(d: dict) -> "KeyChange":
        return KeyChange(d["table"], d["version"], d["before"], d["after"], tuple(d.get("filled", ())))

    def describe(self) -> str:
        return f"{self.table} version {self.version}: key {describe(self.before)} → {describe(self.after)}"


def describe(key: dict) -> str:
    region = f", region column {key['region_column']}" if key.get("region_column") else ""
    return f"[{', '.join(key['primary_key'])}]{region}"


def columns(key: dict) -> list[str]:
    return list(dict.fromkeys([*key["primary_key"], *([key["region_column"]] if key.get("region_column") else [])]))


def recorded(definition: dict) -> list[KeyChange]:
    """The key changes a job went through, oldest first."""
    return [KeyChange.from_json(d) for d in definition.get("key_changes", ())]


def in_force(definition: dict, declared: dict[str, dict]) -> dict[str, dict]:
    """Each table's key as the job emits it now: as recorded in the job, else (a job created before keys
    were recorded) as project.yml declares it."""
    keys = definition.get("keys") or {}
    return {t: keys.get(t, key) for t, key in declared.items()}


def earlier(definition: dict, table: str, key: dict) -> KeyChange | None:
    """The change that left `key` behind, when the job had it before: a node reading an older project.yml."""
    return next((c for c in recorded(definition) if c.table == table and c.before == key), None)


def with_change(definition: dict, change: KeyChange) -> dict:
    """The job's definition once it emits `change.table` under the new key."""
    return {
        **definition,
        "keys": {**definition.get("keys", {}), change.table: change.after},
        "key_changes": [*definition.get("key_changes", ()), change.to_json()],
    }
