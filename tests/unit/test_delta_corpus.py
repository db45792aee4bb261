"""Every real Delta table of the corpus (`support.corpus`) read by feedctl's reader (`source/`) and by verify's
second reader (`verify/second_reader.py`), which share no code: the same rows, value for value (timestamps to
the microsecond, decimals to the digit, maps, NaN), for snapshots and for change data. Then what compile and
debug say of each table. Runs through Spark are in tests/spark/test_delta_corpus_runs.py."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
import yaml

from feedctl.source.change_source import ChangeSource
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.verify.second_reader import SecondReader
from support import Cli
from support.cli import checks_of, diagnostics
from support.corpus import CHANGE_DATA_FROM, INCOMPLETE, KEYS, NO_KEY, ident, require, tables

READABLE = [t for t in tables() if t not in INCOMPLETE]


def _rows(table: pa.Table) -> list[str]:
    """Rows in a form equal for equal values only (NaN equal to NaN, -0.0 apart from 0.0), in any order."""

    def canonical(v):
        if isinstance(v, float):
            return "NaN" if math.isnan(v) else repr(v)
        if isinstance(v, dict):
            return {k: canonical(x) for k, x in sorted(v.items())}
        if isinstance(v, list):
            return [canonical(x) for x in v]
        if isinstance(v, tuple):
            return [canonical(x) for x in v]
        return repr(v)

    return sorted(json.dumps(canonical(r)) for r in table.to_pylist())


@pytest.mark.parametrize("name", READABLE)
def test_the_snapshot_is_the_table_as_the_second_reader_reads_it(name):
    path = str(require() / name)
    source = DeltaSource(name, path)
    version = source.latest_version()
    ours = source.snapshot(version).read_all()
    truth = SecondReader(name, path, None).rows(version)
    assert ours.schema.names == truth.schema.names
    assert _rows(ours) == _rows(truth)
    keys = {tuple(json.dumps(r[c], default=str) for c in KEYS[name]) for r in truth.to_pylist()}
    assert (len(keys) == truth.num_rows) != (name in NO_KEY), "support.corpus is wrong about the table's key"


@pytest.mark.parametrize("name", sorted(CHANGE_DATA_FROM))
def test_the_change_data_is_the_history_as_the_second_reader_reads_it(name):
    path = str(require() / name)
    source = DeltaSource(name, path)
    first, last = CHANGE_DATA_FROM[name], source.latest_version()
    ours = source.changes(first - 1, last).read_all().drop_columns(["_commit_timestamp"])
    truth = SecondReader(name, path, None).changes(first, last)
    assert _rows(ours) == _rows(truth.select(ours.schema.names))
    # the key identifies a row in every version: one image before and one after a change
    seen = [
        (
            r["_commit_version"],
            r["_change_type"] in ("insert", "update_postimage"),
            tuple(json.dumps(r[c], default=str) for c in KEYS[name]),
        )
        for r in truth.to_pylist()
    ]
    assert len(seen) == len(set(seen))


def test_values_no_library_reads_right_are_read_exactly():
    corpus = require()

    def rows(name, *columns):
        table = DeltaSource(name, str(corpus / name)).snapshot(0, list(columns)).read_all()
        return sorted(table.to_pylist(), key=lambda r: json.dumps(r, default=str))

    # Spark's INT96 "valid to" dates: nanoseconds would wrap them around to 1816
    edge = rows("rs__table_with_edge_timestamps", "SOME_VALUE", "BIG_DATE")
    assert [(r["SOME_VALUE"], r["BIG_DATE"].isoformat()) for r in edge] == [
        (1, "9999-12-31T00:00:00+00:00"),
        (2, "9999-12-30T00:00:00+00:00"),
    ]
    # a negative decimal partition value, read from the log's string
    decimals = rows("golden__basic-decimal-table", "part")
    assert str(decimals[0]["part"]) == "-2342342.23423"
    # partition folders Spark escaped (`%3A`), found by the log's paths
    ntz = DeltaSource("t", str(corpus / "handedited__timestamp_ntz-cdf")).changes(-1, 1).read_all()
    assert (
        sorted(str(v) for v in ntz["tsNtzPartition"].to_pylist() if v)
        == ["2013-07-05 17:01:00.123456"] * 3 + ["2021-11-18 02:30:00.123456"] * 3
    )


def test_a_table_whose_log_names_a_missing_file_fails_naming_it():
    name = INCOMPLETE[0]
    source = DeltaSource(name, str(require() / name))
    with pytest.raises(SourceError, match=rf"table {name}: cannot read version \d+: a data file is gone"):
        source.snapshot(source.latest_version()).read_all()


def _project(root, names: list[str], feeds: list[dict], changes: str | None = None):
    corpus = require()
    tables = [{"name": ident(n), "path": str(corpus / n), "primary_key": KEYS[n]} for n in names]
    if changes is not None:
        tables = [{**t, "changes": changes} for t in tables]
    (root / "feeds").mkdir(parents=True)
    (root / "sinks").mkdir()
    (root / "project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "corpus",
                "config-version": 1,
                "state": "sqlite:///target/state.db",
                "sources": [{"name": "c", "tables": tables}],
            },
            sort_keys=False,
        )
    )
    (root / "feeds" / "feeds.yml").write_text(yaml.safe_dump({"feeds": feeds}, sort_keys=False))
    (root / "sinks" / "sinks.yml").write_text(
        yaml.safe_dump({"sinks": [{"name": "out", "uri": "file://target/sink"}]}, sort_keys=False)
    )
    return root


def test_compile_refuses_to_follow_a_table_without_change_data_from_it_alone_and_scans_it(tmp_path):
    without = [n for n in READABLE if n not in CHANGE_DATA_FROM and n != "rs__checkpoint-cdf-table"]
    feeds = [{"name": f"f{i}", "tables": [f"c.{ident(n)}"], "sink": "out"} for i, n in enumerate(without)]
    feeds.append(
        {
            "name": "scans",
            "tables": [f"c.{ident(n)}" for n in without],
            "sink": "out",
            "options": {"initial_scan": "only"},
        }
    )
    # read from the log where the change data feed is off (the default, `auto`): every feed compiles
    result = Cli(_project(tmp_path / "auto", without, feeds))("compile", json_logs=True)
    assert result.exit_code == 0, result.output
    result = Cli(_project(tmp_path / "p", without, feeds, changes="cdf"))("compile", json_logs=True)
    assert result.exit_code == 1, result.output
    refused = [d for d in diagnostics(result) if d["code"] == "FC525"]
    assert sorted(d["message"].split(" follows the changes of ")[1].split(",")[0] for d in refused) == sorted(
        f"c.{ident(n)}" for n in without
    )
    assert all(d["file"].endswith("feeds.yml") for d in refused)
    assert not [d for d in diagnostics(result) if d["code"] not in ("FC525",) and d["severity"] == "error"]


def test_debug_reads_every_table_as_run_would(tmp_path):
    project = _project(
        tmp_path / "p",
        tables(),
        [
            {
                "name": "scans",
                "tables": [f"c.{ident(n)}" for n in tables()],
                "sink": "out",
                "options": {"initial_scan": "only"},
            },
            {"name": "changes", "tables": [f"c.{ident(n)}" for n in sorted(CHANGE_DATA_FROM)], "sink": "out"},
        ],
    )
    checks = checks_of(Cli(project)("debug", json_logs=True))
    for name in tables():
        check = checks[f"table c.{ident(name)}"]
        if name in INCOMPLETE:
            assert not check["ok"] and "a data file is gone" in check["detail"], check
        else:
            assert check["ok"], check


def test_versions_before_the_change_data_feed_was_turned_on_are_refused_from_it_alone():
    name = "handedited__vacuum-check-cdf"  # its change data feed is on from version 2
    source = DeltaSource(name, str(require() / name), changes=ChangeSource.CDF)
    with pytest.raises(SourceError, match=r"versions 1\.\.2: the change data feed is off at version 1"):
        source.changes(0, 2).read_all()
    assert source.changes(1, 2).read_all().num_rows == 0  # version 2 turned it on, and changed no row
