"""Read a Delta table's columns and partition columns with deltalake, without Spark."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableSchema:
    columns: list[str]
    partition_columns: list[str]
    version: int
    change_data_feed: bool = True  # delta.enableChangeDataFeed at that version


def read_table_schema(location: str, storage_options: dict | None = None) -> TableSchema:
    """Raises an exception saying why when the table cannot be opened."""
    from deltalake import DeltaTable

    table = DeltaTable(location, storage_options=storage_options or None)
    return TableSchema(
        columns=[f.name for f in table.schema().fields],
        partition_columns=list(table.metadata().partition_columns),
        version=table.version(),
        change_data_feed=table.metadata().configuration.get("delta.enableChangeDataFeed", "false").lower() == "true",
    )
