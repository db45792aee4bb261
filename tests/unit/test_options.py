"""Feed options: every default `resolve` fills in and every combination `check` rejects (reference §2).

Rules are matched by (option, code, severity), never by message wording.
"""

from __future__ import annotations

import pytest

from feedctl.diagnostics import Severity
from feedctl.project.options import DEFAULTS, check, resolve

SINK_KINDS = ("cloudstorage", "kafka", "webhook", "null", "sinkless", None)


def found(options: dict, sink_kind: str | None = "cloudstorage", has_query: bool = False) -> set[tuple[str, str]]:
    """(option, code) of every error rule."""
    return {(r.option, r.code) for r in check(options, sink_kind, has_query) if r.severity is Severity.ERROR}


def warned(options: dict, sink_kind: str | None = "cloudstorage", has_query: bool = False) -> set[tuple[str, str]]:
    return {(r.option, r.code) for r in check(options, sink_kind, has_query) if r.severity is Severity.WARNING}


# ---------------------------------------------------------------- defaults


def test_every_option_has_a_default():
    o = resolve({}, "kafka", has_query=False)
    assert set(o) == set(DEFAULTS)
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
        ("enriched_properties", []),
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
    assert resolve({}, "kafka", has_query=False)[name] == value


def test_envelope_defaults_to_bare_for_a_cdc_query():
    assert resolve({}, "kafka", has_query=True)["envelope"] == "bare"
    assert resolve({}, "kafka", has_query=False)["envelope"] == "wrapped"
    assert resolve({"envelope": "wrapped"}, "kafka", has_query=True)["envelope"] == "wrapped"


def test_initial_scan_defaults_to_no_with_a_cursor():
    assert resolve({}, "kafka", False)["initial_scan"] == "yes"
    assert resolve({"cursor": "1632241564629087669.0000000000"}, "kafka", False)["initial_scan"] == "no"
    assert resolve({"cursor": "version:3", "initial_scan": "yes"}, "kafka", False)["initial_scan"] == "yes"
    assert resolve({"cursor": "version:3", "initial_scan": "only"}, "kafka", False)["initial_scan"] == "only"


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
    assert (o["key_in_value"], o["topic_in_value"]) == (key_in_value, topic_in_value)
    # asking for them off changes nothing where the sink needs them
    off = resolve({"key_in_value": False, "topic_in_value": False}, sink_kind, False)
    assert (off["key_in_value"], off["topic_in_value"]) == (key_in_value, topic_in_value)


def test_flags_can_be_turned_on_for_any_sink():
    o = resolve({"key_in_value": True, "topic_in_value": True}, "kafka", False)
    assert o["key_in_value"] is True and o["topic_in_value"] is True


def test_given_values_override_defaults_and_none_does_not():
    o = resolve(
        {"format": "avro", "resolved": "10s", "min_checkpoint_frequency": None, "on_error": "pause"},
        "cloudstorage",
        False,
    )
    assert (o["format"], o["resolved"], o["min_checkpoint_frequency"], o["on_error"]) == ("avro", "10s", "30s", "pause")


@pytest.mark.parametrize(
    "given, parsed",
    [("16MiB", 16 * 2**20), ("64MB", 64 * 10**6), (1048576, 1048576), ("1 GiB", 2**30), ("256M", None), (0, None)],
)
def test_batch_bytes_resolves_to_bytes(given, parsed):
    assert resolve({"batch_bytes": given}, "kafka", False)["batch_bytes"] == parsed


def test_resolve_does_not_change_its_input():
    options = {"envelope": "bare", "cursor": "version:1"}
    resolve(options, "webhook", True)
    assert options == {"envelope": "bare", "cursor": "version:1"}


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
    from feedctl.project.options import check

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
    assert feeds["plain"].options["range_distribution_strategy"] == "balanced_simple"
    assert feeds["own"].options["range_distribution_strategy"] == "default"  # a feed's own option wins


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
