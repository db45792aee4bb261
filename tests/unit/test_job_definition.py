"""A job's definition, typed: read as earlier versions stored it, and what it says holds for each batch."""

from __future__ import annotations

import json

from feedctl.job.definition import JobDefinition
from feedctl.job.key_change import Key, KeyChange
from feedctl.job.option_change import OptionChange
from feedctl.job.table_change import TableChange, TableOp
from feedctl.units import Hlc

# As the first versions stored a job: no keys, no revision, no history, and options that existed then.
STORED_LONG_AGO = {
    "tables": ["movr.rides"],
    "sql": None,
    "options": {"initial_scan": "no", "format": "json", "envelope": "wrapped", "resolved": "10s"},
    "sink": "rides_out",
}

# As a job that took changes in place stores itself now.
STORED_NOW = {
    **STORED_LONG_AGO,
    "options": {**STORED_LONG_AGO["options"], "diff": True},
    "columns": None,
    "keys": {"movr.rides": {"primary_key": ["crdb_region", "id"], "region_column": "crdb_region"}},
    "sink_display": {"name": "rides_out", "uri": "file://out", "options": {}},
    "metadata": {"description": "", "tags": [], "meta": {}},
    "view": "view:0123456789abcdef",
    "view_since": 41,
    "revision": 3,
    "option_changes": [
        {"from_batch": 5, "after": [100, 0], "was": {"diff": False}, "now": {"diff": True}, "node": "n1"}
    ],
    "table_changes": [
        {"table": "movr.users", "op": "added", "version": 7, "scan": True, "scan_at": None},
        {"table": "movr.users", "op": "dropped", "version": 9, "scan": False, "scan_at": None},
    ],
    "key_changes": [
        {
            "table": "movr.rides",
            "version": 12,
            "before": {"primary_key": ["id"], "region_column": None},
            "after": {"primary_key": ["crdb_region", "id"], "region_column": "crdb_region"},
            "filled": ["crdb_region"],
        }
    ],
}


def test_a_definition_stored_long_ago_reads_with_what_it_did_not_record_at_its_default():
    definition = JobDefinition.from_json(STORED_LONG_AGO)
    assert definition.tables == ("movr.rides",)
    assert definition.options.resolved == "10s"  # what it recorded is kept
    assert definition.options.schema_change_policy == "backfill"  # an option it did not know: the default
    assert definition.options.batch_bytes == 256 * 1024 * 1024  # as a feed's options are resolved
    assert (definition.revision, definition.view_since, definition.keys) == (1, 0, {})
    assert definition.keys_in_force({"movr.rides": Key.of(["id"])}) == {"movr.rides": Key(("id",))}


def test_a_definition_reads_back_as_it_was_stored():
    definition = JobDefinition.from_json(json.loads(json.dumps(STORED_NOW)))
    stored_again = json.loads(json.dumps(definition.to_json()))
    assert {k: stored_again[k] for k in STORED_NOW if k != "options"} == {
        k: v for k, v in STORED_NOW.items() if k != "options"
    }
    assert STORED_NOW["options"].items() <= stored_again["options"].items()  # and the defaults it lacked
    assert JobDefinition.from_json(stored_again) == definition


def test_what_holds_for_each_batch():
    definition = JobDefinition.from_json(STORED_NOW)
    assert [definition.options_at(b).diff for b in (4, 5, 6)] == [False, True, True]
    assert definition.tables_ever() == ["movr.rides", "movr.users"]
    assert definition.key_left("movr.rides", Key(("id",))).version == 12
    assert definition.key_left("movr.rides", Key(("crdb_region", "id"), "crdb_region")) is None
    declared = {"movr.rides": Key(("id",))}  # an older project.yml: the job's own key wins
    assert definition.keys_in_force(declared)["movr.rides"].region_column == "crdb_region"


def test_a_change_makes_a_new_definition_and_leaves_the_one_it_came_from():
    was = JobDefinition.from_json(STORED_LONG_AGO)
    added = was.with_table_changes(
        ["movr.rides", "movr.users"],
        [TableChange("movr.users", TableOp.ADDED, 3, scan=True)],
        {"movr.users": Key(("id",))},
    )
    assert [c.table for c in added.unscanned()] == ["movr.users"]
    scanned = added.with_scan("movr.users", Hlc(500, 1))
    assert scanned.unscanned() == [] and scanned.table_changes[0].scan_at == Hlc(500, 1)
    rekeyed = scanned.with_key_change(KeyChange("movr.users", 8, Key(("id",)), Key(("city", "id"))))
    assert rekeyed.keys["movr.users"] == Key(("city", "id"))
    changed = rekeyed.with_option_change(OptionChange(2, None, {"diff": False}, {"diff": True}))
    assert changed.options.diff and changed.options_at(1).diff is False
    assert was.tables == ("movr.rides",) and was.options.diff is False and added.keys["movr.users"] == Key(("id",))
    assert changed.revised({"description": "x"}, "view:1", 9).revision == was.revision + 1
