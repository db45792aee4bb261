"""Classifying a change of a table's schema as CockroachDB's schema feed does, and which feeds react."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from feedctl.options import resolve
from feedctl.source import schema_change

BEFORE = pa.schema([("id", pa.int64()), ("name", pa.string()), ("n", pa.int32())])


def _change(after: pa.Schema, rewrote: bool = False) -> schema_change.SchemaChange:
    return schema_change.between("s.t", 7, BEFORE, after, rewrote)


NULLABLE = BEFORE.append(pa.field("tier", pa.string()))
DEFAULTED = BEFORE.append(pa.field("tier", pa.string(), metadata={"CURRENT_DEFAULT": "'basic'"}))
GENERATED = BEFORE.append(pa.field("tier", pa.string(), metadata={"delta.generationExpression": "upper(name)"}))
DROPPED = pa.schema([("id", pa.int64()), ("n", pa.int32())])
WIDENED = pa.schema([("id", pa.int64()), ("name", pa.string()), ("n", pa.int64())])


@pytest.mark.parametrize(
    ("after", "rewrote", "default", "column_changes", "text"),
    [
        (NULLABLE, False, False, True, "column tier added"),
        (NULLABLE, True, True, True, "column tier added with a value for existing rows"),
        (DEFAULTED, False, True, True, "column tier added with a value for existing rows"),
        (GENERATED, False, True, True, "column tier added with a value for existing rows"),
        (DROPPED, True, True, True, "column name dropped"),
        (WIDENED, False, False, False, "column n type widened"),
    ],
)
def test_events_of_each_kind_of_change(after, rewrote, default, column_changes, text):
    change = _change(after, rewrote)
    assert change.is_event("default") is default
    assert change.is_event("column_changes") is column_changes
    assert change.describe() == f"s.t version 7: {text}"


def test_a_query_reacts_only_to_the_columns_it_reads():
    added, dropped = _change(NULLABLE, rewrote=True), _change(DROPPED, rewrote=True)
    assert not added.is_event("column_changes", ["id", "name"]) and added.is_event("default", None)
    assert dropped.is_event("default", ["id", "name"]) and not dropped.is_event("default", ["id", "n"])


def test_the_action_is_the_policy_for_an_event_and_none_otherwise():
    options = resolve({"schema_change_policy": "stop"}, None, False)
    assert schema_change.action(_change(DROPPED, rewrote=True), options, None) == "stop"
    assert schema_change.action(_change(NULLABLE), options, None) == "none"
    every_column = options.with_values({"schema_change_events": "column_changes"})
    assert schema_change.action(_change(NULLABLE), every_column, None) == "stop"
    stored = json.dumps({"s.t": schema_change.action(_change(NULLABLE), every_column, None)})
    assert stored == '{"s.t": "stop"}'  # intents store it as the policy's value


def test_a_rename_under_column_mapping_is_a_column_dropped_and_one_added(tmp_path):
    """delta-rs cannot turn column mapping on; the commit a writer that can (Spark) makes to rename a column
    is written here as it would: a protocol and a metaData action. The renamed column reads its values from
    the files written before the rename, by its physical name."""
    import json

    from deltalake import write_deltalake

    from feedctl.source.delta import DeltaSource

    path = tmp_path / "t"
    write_deltalake(
        str(path), pa.table({"id": [1, 2], "name": ["a", "b"]}), configuration={"delta.enableChangeDataFeed": "true"}
    )
    log = path / "_delta_log"
    metadata = next(
        json.loads(line)["metaData"] for line in (log / f"{0:020d}.json").read_text().splitlines() if "metaData" in line
    )
    fields = [
        {
            "name": name,
            "type": kind,
            "nullable": True,
            "metadata": {"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": physical},
        }
        for i, (name, kind, physical) in enumerate([("id", "long", "id"), ("label", "string", "name")])
    ]
    metadata.update(
        schemaString=json.dumps({"type": "struct", "fields": fields}),
        configuration={
            **metadata["configuration"],
            "delta.columnMapping.mode": "name",
            "delta.columnMapping.maxColumnId": "2",
        },
    )
    commit = [
        {"commitInfo": {"timestamp": 1795537907200, "operation": "RENAME COLUMN"}},
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {"metaData": metadata},
    ]
    (log / f"{1:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in commit))
    source = DeltaSource("s.t", str(path))
    assert source.schema_changes(0, 1) == [1]
    change = source.schema_change(1)
    assert (change.added, change.dropped) == (("label",), ("name",))
    assert source.snapshot(1).read_all().to_pylist() == [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]
