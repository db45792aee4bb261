"""What a feed's reader is told to read of a table (`compiler/pushdown.py` derives it from the query): a
module of its own, without sqlglot, so that what compile kept (`compiler/partial.py`) loads without it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Pushdown:
    columns: list[str] | None  # None: every column
    predicates: list[str] = field(default_factory=list)  # Spark SQL, unqualified column names
    partition_predicates: list[str] = field(default_factory=list)  # the subset on partition columns only
    scan_filter: str | None = None  # what a snapshot's reader skips files by
    change_filter: str | None = None  # what the change data's reader keeps rows (and files) by

    def to_json(self) -> dict:
        return {
            "columns": self.columns,
            "predicates": self.predicates,
            "partition_predicates": self.partition_predicates,
            "scan_filter": self.scan_filter,
            "change_filter": self.change_filter,
        }
