"""Classifying a change of a table's schema as CockroachDB's schema feed does, and which feeds react."""

from __future__ import annotations

import pyarrow as pa
import pytest

from feedctl.project.options import DEFAULTS
from feedctl.source import schema_change

BEFORE = pa.schema([("id", pa.int64()), ("name", pa.string()), ("n", pa.int32())])


def _change(after: pa.Schema, rewrote: bool = False) -> schema_change.SchemaChange:
    return schema_change.between("s.t", 7, BEFORE, after, rewrote)


NULLABLE = BEFORE.append(pa.field("tier", pa.string()))
DEFAULTED = BEFORE.append(pa.field("tier", pa.string(), metadata={"CURRENT_DEFAULT": "'basic'"}))
GENERATED = BEFORE.append(pa.field("tier", pa.string(), metadata={"delta.generationExpression": "upper(name)"}))
DROPPED = pa.schema([("id", pa.int64()), ("n", pa.int32())])
WIDENED = pa.schema([("id", pa.int64()), ("name", pa.string()), ("n", pa.int64())])


@pytest.mark.parametrize(("after", "rewrote", "default", "column_changes", "text"), [
    (NULLABLE, False, False, True, "column tier added"),
    (NULLABLE, True, True, True, "column tier added with a value for existing rows"),
    (DEFAULTED, False, True, True, "column tier added with a value for existing rows"),
    (GENERATED, False, True, True, "column tier added with a value for existing rows"),
    (DROPPED, True, True, True, "column name dropped"),
    (WIDENED, False, False, False, "column n type widened"),
])
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
    options = {**DEFAULTS, "schema_change_policy": "stop"}
    assert schema_change.action(_change(DROPPED, rewrote=True), options, None) == "stop"
    assert schema_change.action(_change(NULLABLE), options, None) == "none"
    assert schema_change.action(_change(NULLABLE), {**options, "schema_change_events": "column_changes"}, None) \
        == "stop"
