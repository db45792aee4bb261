"""Read a Delta table's columns and partition columns with deltalake, without Spark."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableSchema:
    columns: list[str]
    partition_columns: list[str]
    version: int | None
    change_data_feed: bool = True  # delta.enableChangeDataFeed at that version
    types: dict = field(default_factory=dict)  # column -> its Delta type: "long", or a nested type's JSON
    frozen: bool = False  # read from schemas.yml, the table being out of reach
    unreadable: str | None = None  # why feedctl cannot read the table (a table feature it does not read)


def read_table_schema(location: str, storage_options: dict | None = None) -> TableSchema:
    """Raises an exception saying why when the table cannot be opened: `TableRefused` when its protocol asks
    for what feedctl does not read."""
    from deltalake import DeltaTable

    from feedctl.source.delta_log import DeltaLog
    from feedctl.source.table_features import TableRefused, refusal_in_log, unreadable
    from feedctl.source.table_store import TableStore

    try:
        table = DeltaTable(location, storage_options=storage_options or None)
    except Exception:
        refused = refusal_in_log(DeltaLog(TableStore(location, storage_options)))
        if refused is not None:
            raise TableRefused(refused) from None
        raise
    fields = json.loads(table.schema().to_json())["fields"]
    return TableSchema(
        columns=[f["name"] for f in fields],
        partition_columns=list(table.metadata().partition_columns),
        version=table.version(),
        change_data_feed=table.metadata().configuration.get("delta.enableChangeDataFeed", "false").lower() == "true",
        types={f["name"]: f["type"] for f in fields},
        unreadable=unreadable(table.protocol()),
    )
