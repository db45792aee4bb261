"""Feed options: every default `resolve` fills in and every combination `check` rejects (reference §2).

Rules are matched by (option, code, severity), never by message wording.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import FrozenInstanceError, fields
from enum import StrEnum
from pathlib import Path
from typing import get_type_hints

import pytest

from feedctl import options as options_module
from feedctl.diagnostics import Severity
from feedctl.options import (
    DEFAULTS,
    Envelope,
    Format,
    InitialScan,
    OnError,
    Options,
    RangeDistributionStrategy,
    SchemaChangeEvents,
    SchemaChangePolicy,
    check,
    resolve,
)

SINK_KINDS = ("cloudstorage", "kafka", "webhook", "null", "sinkless", None)


def found(options: dict, sink_kind: str | None = "cloudstorage", has_query: bool = False) -> set[tuple[str, str]]:
    """(option, code) of every error rule."""
    return {(r.option, r.code) for r in check(options, sink_kind, has_query) if r.severity is Severity.ERROR}


def warned(options: dict, sink_kind: str | None = "cloudstorage", has_query: bool = False) -> set[tuple[str, str]]:
    return {(r.option, r.code) for r in check(options, sink_kind, has_query) if r.severity is Severity.WARNING}


# ---------------------------------------------------------------- defaults


def test_every_option_has_a_default():
    o = resolve({}, "kafka", has_query=False).to_json()
    assert list(o) == list(DEFAULTS)  # in its order: stored definitions and target/ are written in it
    assert o == {**DEFAULTS, "batch_bytes": 256 * 2**20}


@pytest.mark.parametrize(
    "name, value",
    [
        ("resolved", None),
        ("min_checkpoint_frequency", "30s"),
        ("updated", False),
        ("diff", False),
        ("mvcc_timestamp", False),
        ("envelope", "wrapped"),
        ("enriched_properties", ()),
        ("format", "json"),
        ("initial_scan", "yes"),
        ("cursor", None),
        ("end_time", None),
        ("schema_change_policy", "backfill"),
        ("schema_change_events", "default"),
        ("execution_locality", None),
        ("range_distribution_strategy", "default"),
        ("key_in_value", False),
        ("topic_in_value", False),
        ("full_table_name", False),
        ("on_error", "fail"),
        ("batch_rows", 2_000_000),
        ("batch_bytes", 268_435_456),
    ],
)
def test_default_values_follow_cockroachdb(name, value):
    assert getattr(resolve({}, "kafka", has_query=False), name) == value


def test_envelope_defaults_to_bare_for_a_cdc_query():
    assert resolve({}, "kafka", has_query=True).envelope == "bare"
    assert resolve({}, "kafka", has_query=False).envelope == "wrapped"
    assert resolve({"envelope": "wrapped"}, "kafka", has_query=True).envelope == "wrapped"


def test_initial_scan_defaults_to_no_with_a_cursor():
    assert resolve({}, "kafka", False).initial_scan == "yes"
    assert resolve({"cursor": "1632241564629087669.0000000000"}, "kafka", False).initial_scan == "no"
    assert resolve({"cursor": "version:3", "initial_scan": "yes"}, "kafka", False).initial_scan == "yes"
    assert resolve({"cursor": "version:3", "initial_scan": "only"}, "kafka", False).initial_scan == "only"


@pytest.mark.parametrize(
    "sink_kind, key_in_value, topic_in_value",
    [
        ("cloudstorage", True, False),
        ("webhook", True, True),
        ("kafka", False, False),
        ("null", False, False),
        ("sinkless", False, False),
        (None, False, False),
    ],
)
def test_key_and_topic_in_value_forced_on_by_the_sink(sink_kind, key_in_value, topic_in_value):
    o = resolve({}, sink_kind, False)
    assert (o.key_in_value, o.topic_in_value) == (key_in_value, topic_in_value)
    # asking for them off changes nothing where the sink needs them
    off = resolve({"key_in_value": False, "topic_in_value": False}, sink_kind, False)
    assert (off.key_in_value, off.topic_in_value) == (key_in_value, topic_in_value)


def test_flags_can_be_turned_on_for_any_sink():
    o = resolve({"key_in_value": True, "topic_in_value": True}, "kafka", False)
    assert o.key_in_value is True and o.topic_in_value is True


def test_given_values_override_defaults_and_none_does_not():
    o = resolve(
        {"format": "avro", "resolved": "10s", "min_checkpoint_frequency": None, "on_error": "pause"},
        "cloudstorage",
        False,
    )
    assert (o.format, o.resolved, o.min_checkpoint_frequency, o.on_error) == ("avro", "10s", "30s", "pause")


@pytest.mark.parametrize(
    "given, parsed",
    [("16MiB", 16 * 2**20), ("64MB", 64 * 10**6), (1048576, 1048576), ("1 GiB", 2**30), ("256M", None), (0, None)],
)
def test_batch_bytes_resolves_to_bytes(given, parsed):
    assert resolve({"batch_bytes": given}, "kafka", False).batch_bytes == parsed


def test_resolve_does_not_change_its_input():
    options = {"envelope": "bare", "cursor": "version:1"}
    resolve(options, "webhook", True)
    assert options == {"envelope": "bare", "cursor": "version:1"}


# ---------------------------------------------------------------- typed, stored, hashed

# The options typed as one of a fixed set of values, as Options declares them.
ENUMS = {
    name: hint for name, hint in get_type_hints(Options).items() if isinstance(hint, type) and issubclass(hint, StrEnum)
}

# Every option away from its default (a webhook forces key_in_value and topic_in_value on).
NOT_DEFAULT = {
    "resolved": "10s",
    "min_checkpoint_frequency": "5s",
    "updated": True,
    "diff": True,
    "mvcc_timestamp": True,
    "envelope": "enriched",
    "enriched_properties": ["source", "schema"],
    "format": "parquet",
    "initial_scan": "only",
    "cursor": "version:3",
    "end_time": "2030-01-01T00:00:00Z",
    "schema_change_policy": "stop",
    "schema_change_events": "column_changes",
    "execution_locality": "region=us-east1",
    "range_distribution_strategy": "balanced_simple",
    "full_table_name": True,
    "on_error": "pause",
    "batch_rows": 1000,
    "batch_bytes": "1MiB",
    "metrics_label": "orders",
}


def test_resolve_gives_every_option_typed():
    o = resolve({}, "cloudstorage", has_query=False)
    assert isinstance(o, Options)
    assert (o.envelope, o.format, o.initial_scan, o.on_error) == (
        Envelope.WRAPPED,
        Format.JSON,
        InitialScan.YES,
        OnError.FAIL,
    )
    assert (o.schema_change_policy, o.schema_change_events, o.range_distribution_strategy) == (
        SchemaChangePolicy.BACKFILL,
        SchemaChangeEvents.DEFAULT,
        RangeDistributionStrategy.DEFAULT,
    )
    assert all(type(getattr(o, name)) is enum for name, enum in ENUMS.items())
    assert (o.enriched_properties, o.batch_rows, o.batch_bytes) == ((), 2_000_000, 256 * 2**20)
    assert (o.key_in_value, o.topic_in_value) == (True, False)  # forced on for cloud storage
    webhook = resolve({"key_in_value": False, "topic_in_value": False}, "webhook", has_query=True)
    assert (webhook.key_in_value, webhook.topic_in_value, webhook.envelope) == (True, True, Envelope.BARE)
    typed = resolve(NOT_DEFAULT, "webhook", has_query=False)
    assert typed.enriched_properties == ("source", "schema") and typed.batch_bytes == 2**20
    assert typed.initial_scan is InitialScan.ONLY and typed.on_error is OnError.PAUSE
    with pytest.raises(FrozenInstanceError):
        typed.diff = False  # type: ignore[misc]


def test_options_have_the_fields_of_defaults_in_its_order():
    assert [f.name for f in fields(Options) if f.name != "later"] == list(DEFAULTS)


def test_valued_options_take_the_values_the_schema_allows():
    """Every option the schema gives a fixed set of values is a StrEnum of exactly those values."""
    schema = json.loads(
        (Path(options_module.__file__).parent / "project" / "schemas" / "feeds.schema.json").read_text()
    )
    allowed = {name: set(p["enum"]) for name, p in schema["$defs"]["options"]["properties"].items() if "enum" in p}
    assert {name: {m.value for m in enum} for name, enum in ENUMS.items()} == allowed
    assert ENUMS["envelope"] is Envelope and ENUMS["on_error"] is OnError and len(ENUMS) == 7


def test_enums_are_their_strings():
    o = resolve({"envelope": "key_only"}, "kafka", has_query=False)
    assert o.envelope == "key_only" and o.envelope in ("key_only", "row") and o.envelope in {"key_only"}
    assert {"key_only": 1}[o.envelope] == 1  # a dict keyed by the strings finds it
    assert f"envelope: {o.envelope}" == "envelope: key_only" and str(o.format) == "json"
    assert json.dumps({"envelope": o.envelope, o.format: 1}) == '{"envelope": "key_only", "json": 1}'
    for enum in ENUMS.values():
        assert all(member == member.value and enum(member.value) is member for member in enum)


def test_to_json_is_the_dict_stored_before_options_were_typed():
    """Stored job definitions and target/manifest.json hold it: plain strings, lists, the parsed batch_bytes."""
    stored = resolve(NOT_DEFAULT, "webhook", has_query=False).to_json()
    assert stored == {
        **DEFAULTS,
        **NOT_DEFAULT,
        "key_in_value": True,
        "topic_in_value": True,
        "batch_bytes": 2**20,
    }
    assert list(stored) == list(DEFAULTS)
    assert all(type(stored[name]) is str for name in ENUMS) and type(stored["enriched_properties"]) is list


@pytest.mark.parametrize("has_query", [False, True])
@pytest.mark.parametrize("given", [{}, NOT_DEFAULT, {"resolved": True, "batch_bytes": "1 GiB", "cursor": "1"}])
def test_to_json_then_from_json_gives_the_same_options(given, has_query):
    o = resolve(given, "cloudstorage", has_query)
    stored = json.loads(json.dumps(o.to_json()))
    assert Options.from_json(stored, has_query) == o
    assert Options.from_json(stored, has_query).to_json() == stored


def test_stored_options_missing_an_option_read_its_default():
    """A job's definition stored before an option existed: the option at its default, as resolve gives it."""
    stored = resolve({"diff": True, "on_error": "pause"}, "kafka", has_query=False).to_json()
    for name in ("envelope", "batch_bytes", "metrics_label", "schema_change_events"):
        del stored[name]
    o = Options.from_json(stored, has_query=True)
    assert (o.diff, o.on_error) == (True, OnError.PAUSE)  # what it stored is kept
    assert (o.envelope, o.batch_bytes, o.metrics_label) == (Envelope.BARE, 256 * 2**20, None)  # bare: a query's
    assert o.schema_change_events is SchemaChangeEvents.DEFAULT
    assert Options.from_json({}, has_query=False) == resolve({}, None, has_query=False)
    # a name this feedctl does not know (a later one stored it, on a node upgraded first) is kept as stored, so
    # that writing the definition back loses nothing; a value its option does not take is refused
    later = Options.from_json({**stored, "a_later_option": {"every": "5s"}}, True)
    assert later == o and later.to_json() == {**o.to_json(), "a_later_option": {"every": "5s"}}
    assert later.with_values({"diff": False}).to_json()["a_later_option"] == {"every": "5s"}
    with pytest.raises(ValueError):
        Options.from_json({**stored, "envelope": "boxed"}, True)


def test_with_values_takes_values_as_stored():
    o = resolve({}, "kafka", has_query=False)
    changed = o.with_values({"on_error": "pause", "diff": True, "enriched_properties": ["schema"], "resolved": None})
    assert (changed.on_error, changed.diff, changed.enriched_properties) == (OnError.PAUSE, True, ("schema",))
    assert changed.on_error is OnError.PAUSE and o.on_error is OnError.FAIL  # a new Options; the old one is kept
    assert changed.with_values({}) == changed and o.with_values({"on_error": "fail"}) == o
    assert changed.in_place() == {**o.in_place(), "on_error": "pause", "diff": True}


def test_options_travel_pickled():
    """A batch's options go to the Spark tasks pickled."""
    o = resolve(NOT_DEFAULT, "cloudstorage", has_query=True)
    again = pickle.loads(pickle.dumps(o))
    assert again == o and again.envelope is Envelope.ENRICHED


def _compiled(raw: dict, sql: str | None):
    from feedctl.compiler.compile import CompiledFeed
    from feedctl.compiler.read_plan import Pushdown
    from feedctl.project.model import FeedDef, Origin

    query = "queries/orders.sql" if sql else None
    origin = Origin("feeds/orders.yml", 3, 5)
    feed = FeedDef("orders", origin, query_file=query, tables=["shop.orders"], sink="out", options=raw)
    columns = ["id", "amount"] if sql else None
    return CompiledFeed(
        feed,
        ["shop.orders"],
        sql,
        resolve(raw, "cloudstorage", sql is not None),
        {"shop.orders": columns},
        {"shop.orders": Pushdown(columns=columns)},
        True,
        sink_display={"name": "out", "uri": "file:///tmp/out", "options": {"file_size": "16MiB"}},
    )


def test_hashes_are_those_made_before_options_were_typed():
    """A running job's definition hash, and each node's view of a feed, are kept in the state store: the same
    feed hashes as it did when options were a dict (these were computed then), or it would look changed."""
    from types import SimpleNamespace

    from feedctl.compiler.compile import definition_hash
    from feedctl.job.revision import view

    plain = _compiled(
        {
            "resolved": "10s",
            "diff": True,
            "updated": True,
            "cursor": "version:3",
            "batch_bytes": "64MiB",
            "execution_locality": "region=us-east-1",
            "metrics_label": "orders",
            "on_error": "pause",
            "full_table_name": True,
        },
        None,
    )
    query = _compiled(
        {
            "resolved": True,
            "schema_change_policy": "stop",
            "schema_change_events": "column_changes",
            "range_distribution_strategy": "balanced_simple",
            "format": "parquet",
            "enriched_properties": [],
        },
        "SELECT id, amount FROM shop.orders\n",
    )
    job = query.options.with_values({"cursor": "version:7", "diff": True, "on_error": "pause"})
    assert definition_hash(plain) == "sha256:281ecf8e6ede67dd3eaa134c796bdd895b3c1fefc6cea16fc06b6f652c888660"
    assert definition_hash(query) == "sha256:226a9d67633b42436ca9e151005eb18e08c1fb3e45f4f734cde22edd78d122ac"
    assert (
        definition_hash(query, job, ["shop.orders"])
        == "sha256:f589aa01db2c2de0e557e78622b3099b377eafd4fa2d1bea290afc985ed5d629"
    )
    project = SimpleNamespace(tables={"shop.orders": SimpleNamespace(primary_key=["id"], region_column=None)})
    assert (view(project, plain), view(project, query)) == ("view:46567673f0ff0d05", "view:f0f46db35d60b97f")


# ---------------------------------------------------------------- valid combinations


@pytest.mark.parametrize(
    "options, sink_kind, has_query",
    [
        ({}, "cloudstorage", False),
        ({}, "sinkless", True),
        (
            {
                "resolved": "10s",
                "min_checkpoint_frequency": "10s",
                "updated": True,
                "diff": True,
                "mvcc_timestamp": True,
            },
            "cloudstorage",
            False,
        ),
        ({"resolved": True}, "kafka", False),
        ({"initial_scan": "only", "format": "csv"}, "cloudstorage", False),
        ({"initial_scan": "only", "format": "csv", "envelope": "bare"}, "null", False),
        ({"initial_scan": "only", "updated": False, "diff": False}, "cloudstorage", False),
        ({"initial_scan": "yes"}, "webhook", False),
        ({"envelope": "key_only"}, "kafka", False),
        ({"envelope": "key_only"}, "sinkless", False),
        ({"envelope": "key_only"}, "null", False),
        ({"envelope": "row"}, "kafka", False),
        ({"envelope": "row", "diff": False}, "sinkless", False),
        ({"envelope": "enriched", "enriched_properties": ["source", "schema"], "diff": True}, "kafka", False),
        ({"envelope": "enriched"}, "webhook", False),
        ({"format": "parquet"}, "cloudstorage", False),
        ({"format": "parquet", "envelope": "bare"}, "null", False),
        ({"format": "avro"}, "cloudstorage", False),
        ({"format": "avro", "envelope": "bare"}, "cloudstorage", True),
        ({"topic_in_value": True}, "kafka", False),
        ({"cursor": "1632241564629087669.0000000000", "end_time": "1632241564629087670"}, "kafka", False),
        ({"cursor": "2021-09-21T16:26:04Z", "end_time": "2030-01-01T00:00:00Z"}, "kafka", False),
        ({"cursor": "version:12", "end_time": "2030-01-01T00:00:00Z"}, "kafka", False),
        ({"cursor": "version:12"}, "kafka", False),
    ],
)
def test_valid_combinations_pass(options, sink_kind, has_query):
    assert check(options, sink_kind, has_query) == []


@pytest.mark.parametrize(
    "options",
    [
        {"envelope": "key_only"},
        {"envelope": "row"},
        {"format": "parquet"},
        {"format": "avro"},
    ],
)
def test_sink_rules_are_skipped_for_an_unknown_sink(options):
    """An unknown sink (kind None) is reported on its own; its options are not judged against a guess."""
    assert found(options, None) == set()


# ---------------------------------------------------------------- FC301: incompatible options


@pytest.mark.parametrize(
    "options",
    [
        {"format": "csv"},
        {"format": "csv", "initial_scan": "yes"},
        {"format": "csv", "initial_scan": "no"},
        {"format": "csv", "cursor": "version:3"},  # a cursor makes initial_scan default to no
    ],
)
def test_csv_needs_initial_scan_only(options):
    assert found(options) == {("format", "FC301")}


@pytest.mark.parametrize(
    "option, value",
    [
        ("resolved", "10s"),
        ("resolved", True),
        ("diff", True),
        ("updated", True),
        ("mvcc_timestamp", True),
        ("end_time", "2030-01-01T00:00:00Z"),
    ],
)
def test_initial_scan_only_excludes(option, value):
    assert found({"initial_scan": "only", option: value}) == {(option, "FC301")}


def test_initial_scan_only_reports_every_excluded_option():
    options = {
        "initial_scan": "only",
        "resolved": "10s",
        "diff": True,
        "updated": True,
        "mvcc_timestamp": True,
        "end_time": "2030-01-01T00:00:00Z",
    }
    assert found(options) == {(o, "FC301") for o in ("resolved", "diff", "updated", "mvcc_timestamp", "end_time")}


@pytest.mark.parametrize("envelope", ["key_only", "row"])
@pytest.mark.parametrize("sink_kind", ["cloudstorage", "webhook"])
def test_key_only_and_row_need_kafka_or_no_sink(envelope, sink_kind):
    assert found({"envelope": envelope}, sink_kind) == {("envelope", "FC301")}


def test_enriched_is_not_for_cloud_storage():
    assert found({"envelope": "enriched"}, "cloudstorage") == {("envelope", "FC301")}


@pytest.mark.parametrize("sink_kind", SINK_KINDS)
def test_enriched_properties_need_enriched(sink_kind):
    for envelope in ("wrapped", "bare", None):
        options = {"enriched_properties": ["source"], **({"envelope": envelope} if envelope else {})}
        assert ("enriched_properties", "FC301") in found(options, sink_kind)
    assert ("enriched_properties", "FC301") not in found({"enriched_properties": [], "envelope": "bare"}, sink_kind)


@pytest.mark.parametrize("envelope", ["row", "key_only"])
def test_diff_needs_a_place_for_before(envelope):
    assert found({"envelope": envelope, "diff": True}, "kafka") == {("diff", "FC301")}


@pytest.mark.parametrize("sink_kind", ["kafka", "webhook", "sinkless"])
def test_parquet_only_to_cloud_storage(sink_kind):
    assert ("format", "FC301") in found({"format": "parquet"}, sink_kind)


@pytest.mark.parametrize("sink_kind", ["cloudstorage", "kafka", "null"])
def test_parquet_excludes_topic_in_value(sink_kind):
    assert ("topic_in_value", "FC301") in found({"format": "parquet", "topic_in_value": True}, sink_kind)


def test_parquet_on_a_webhook_is_reported_once():
    """A webhook forces topic_in_value on; the error is the format, not an option the user did not write."""
    assert found({"format": "parquet"}, "webhook") == {("format", "FC301")}


@pytest.mark.parametrize("sink_kind", ["kafka", "webhook", "sinkless"])
def test_avro_only_to_cloud_storage(sink_kind):
    assert found({"format": "avro"}, sink_kind) == {("format", "FC301")}


@pytest.mark.parametrize("fmt, extra", [("parquet", {}), ("avro", {}), ("csv", {"initial_scan": "only"})])
@pytest.mark.parametrize("envelope", ["key_only", "row", "enriched"])
def test_file_formats_need_a_whole_row_envelope(fmt, extra, envelope):
    assert ("envelope", "FC301") in found({"format": fmt, "envelope": envelope, **extra}, "null")


@pytest.mark.parametrize("fmt, extra", [("parquet", {}), ("avro", {}), ("csv", {"initial_scan": "only"})])
def test_file_formats_with_bare_envelope_pass(fmt, extra):
    assert found({"format": fmt, "envelope": "bare", **extra}, "cloudstorage") == set()


def test_rules_carry_a_message_and_an_error_severity():
    rules = check({"format": "csv", "envelope": "row", "diff": True}, "cloudstorage", False)
    assert {r.option for r in rules} == {"format", "envelope", "diff"}
    for rule in rules:
        assert rule.code == "FC301" and rule.severity is Severity.ERROR and rule.message


# ---------------------------------------------------------------- FC109, FC304: cursor and end_time


@pytest.mark.parametrize(
    "option, value",
    [
        ("cursor", "yesterday"),
        ("cursor", "version:x"),
        ("cursor", "2021-13-01T00:00:00Z"),
        ("cursor", ""),
        ("end_time", "version:12"),
        ("end_time", "soon"),
    ],
)
def test_malformed_timestamps(option, value):
    assert found({option: value}, "kafka") == {(option, "FC109")}


@pytest.mark.parametrize(
    "cursor, end_time",
    [
        ("2020-06-01T00:00:00Z", "2020-01-01T00:00:00Z"),
        ("1632241564629087669.0000000002", "1632241564629087669.0000000001"),
        ("1632241564629087669", "1632241564629087669"),  # equal: nothing could be emitted
        ("2020-01-01T00:00:00+01:00", "2019-12-31T22:30:00Z"),  # the cursor is 23:00 UTC
    ],
)
def test_end_time_must_be_after_cursor(cursor, end_time):
    assert found({"cursor": cursor, "end_time": end_time}, "kafka") == {("end_time", "FC304")}


@pytest.mark.parametrize("cursor", ["2130-01-01T00:00:00Z", "5000000000000000000.0000000000"])
def test_a_cursor_in_the_future_is_refused(cursor):
    assert found({"cursor": cursor}, "kafka") == {("cursor", "FC307")}


def test_end_time_is_not_compared_with_a_version_cursor():
    assert found({"cursor": "version:900", "end_time": "1"}, "kafka") == set()


def test_a_malformed_cursor_is_not_compared_with_end_time():
    assert found({"cursor": "soon", "end_time": "1"}, "kafka") == {("cursor", "FC109")}


# ---------------------------------------------------------------- FC303: resolved below the checkpoint frequency


@pytest.mark.parametrize(
    "options, warns",
    [
        ({"resolved": "5s"}, True),  # default min_checkpoint_frequency is 30s
        ({"resolved": "29.5s"}, True),
        ({"resolved": "30s"}, False),
        ({"resolved": "1m"}, False),
        ({"resolved": True}, False),
        ({"resolved": "5s", "min_checkpoint_frequency": "5s"}, False),
        ({"resolved": "5s", "min_checkpoint_frequency": "500ms"}, False),
        ({"resolved": "500ms", "min_checkpoint_frequency": "1s"}, True),
        ({"resolved": "1m", "min_checkpoint_frequency": "1m30s"}, True),
        ({"resolved": "10 seconds"}, False),  # malformed: a schema error, not a warning
    ],
)
def test_resolved_below_checkpoint_frequency_warns(options, warns):
    assert warned(options, "kafka") == ({("resolved", "FC303")} if warns else set())
    assert found(options, "kafka") == set()


def test_the_warning_suggests_the_fix():
    (rule,) = check({"resolved": "5s"}, "kafka", False)
    assert rule.severity is Severity.WARNING
    assert "min_checkpoint_frequency: 5s" in rule.hint


def test_non_wrapped_envelope_with_avro_rejects_metadata_fields():
    from feedctl.options import check

    for name in ("updated", "mvcc_timestamp", "diff", "topic_in_value"):
        rules = check({"format": "avro", "envelope": "bare", name: True}, "cloudstorage", has_query=False)
        assert [(r.option, r.code) for r in rules] == [(name, "FC301")]
    assert check({"format": "avro", "envelope": "wrapped", "updated": True}, "cloudstorage", False) == []


# ---------------------------------------------------------------- project settings


def project_with_settings(tmp_path, settings: dict):
    import yaml

    from support.e2e import file_sink, write_project

    root = write_project(
        tmp_path / "p",
        {"t": {"path": "data/t", "primary_key": ["id"]}},
        [
            {"name": "plain", "tables": ["s.t"], "sink": "out"},
            {"name": "own", "tables": ["s.t"], "sink": "out", "options": {"range_distribution_strategy": "default"}},
        ],
        [file_sink("out")],
    )
    project = yaml.safe_load((root / "project.yml").read_text())
    (root / "project.yml").write_text(yaml.safe_dump({**project, "settings": settings}, sort_keys=False))
    return root


def test_a_project_setting_gives_feeds_their_range_distribution_strategy(tmp_path):
    from feedctl.compiler.compile import compile_project

    feeds = compile_project(
        project_with_settings(tmp_path, {"default_range_distribution_strategy": "balanced_simple"}), check_tables=False
    ).feeds
    assert feeds["plain"].options.range_distribution_strategy == "balanced_simple"
    assert feeds["own"].options.range_distribution_strategy == "default"  # a feed's own option wins


def test_an_unknown_project_setting_or_strategy_is_an_error_at_its_line(tmp_path):
    from feedctl.compiler.compile import compile_project
    from feedctl.diagnostics import ProjectError

    root = project_with_settings(tmp_path, {"default_range_distribution_strategy": "even", "default_x": 1})
    with pytest.raises(ProjectError) as raised:
        compile_project(root, check_tables=False)
    errors = [d for d in raised.value.diagnostics if d.is_error]
    assert {d.file for d in errors} == {"project.yml"} and len(errors) == 2
    lines = (root / "project.yml").read_text().splitlines()
    assert {lines[d.line - 1].split(":")[0].strip() for d in errors} == {
        "default_range_distribution_strategy",
        "default_x",
    }
