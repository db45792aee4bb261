"""A table's primary key or region column changed in project.yml under a running job: a table made regional
by row (`[id]` → `[crdb_region, id]`, region column `crdb_region`), the seed's case. CockroachDB takes such a
conversion as a schema change; so does a job here, at the version from which the table has every column of
the new key (the version that added them, or, when the job had passed that version when project.yml changed,
the table's next version). The job records each change of a table's key, and emits the versions before it
under the old key and the rest under the new one.

In the version that adds the new key's columns, a row's before image lacks them (`source/key_fill.py`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """What places a table's rows in spans: its primary key, and its region column if regional by row."""

    primary_key: tuple[str, ...]
    region_column: str | None = None

    @staticmethod
    def of(primary_key, region_column: str | None = None) -> Key:
        return Key(tuple(primary_key), region_column)

    def to_json(self) -> dict:
        return {"primary_key": list(self.primary_key), "region_column": self.region_column}

    @staticmethod
    def from_json(d: dict) -> Key:
        return Key(tuple(d["primary_key"]), d.get("region_column"))

    def columns(self) -> list[str]:
        return list(dict.fromkeys([*self.primary_key, *([self.region_column] if self.region_column else [])]))

    def describe(self) -> str:
        region = f", region column {self.region_column}" if self.region_column else ""
        return f"[{', '.join(self.primary_key)}]{region}"


@dataclass(frozen=True)
class KeyChange:
    table: str
    version: int  # the first version emitted under `after`
    before: Key
    after: Key
    filled: tuple[str, ...] = ()  # the new key's columns the version added: before images take them from after

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "version": self.version,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "filled": list(self.filled),
        }

    @staticmethod
    def from_json(d: dict) -> KeyChange:
        return KeyChange(
            d["table"], d["version"], Key.from_json(d["before"]), Key.from_json(d["after"]), tuple(d.get("filled", ()))
        )

    def describe(self) -> str:
        return f"{self.table} version {self.version}: key {self.before.describe()} → {self.after.describe()}"
