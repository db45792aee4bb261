"""Every real Delta table of the corpus (`support.corpus`, copied to a temporary folder) as a feed's source,
run by `feedctl run` and judged by `feedctl verify` (whose second reader shares no code with the reader):
one feed scans every table, and one more for each other format (Parquet, CSV, Avro); one follows the tables
with change data from before their first version; one scans those and follows them; one follows copies of
tables that had none once their change data feed is turned on; one follows the history of the tables without
change data from their log (deletion vectors, checkpoints, column mapping); one follows the writable tables
from their log alone (`changes: log`). Then the copies delta-rs can write are changed as users change tables
(an append, an update moving a row to another partition, a delete, a MERGE, OPTIMIZE, a column added, an
overwrite; in the turned-on copies, an update moving a row to another partition) and the feeds run again:
the writable tables' feeds from their change data and from their log emit the same changes. After a VACUUM,
a last append is still followed.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from feedctl.source.delta import DeltaSource, SourceError
from support.corpus import CHANGE_DATA_FROM, INCOMPLETE, KEYS, NO_KEY, copy, ident, require, tables
from support.e2e import assert_verified, file_sink, messages, read_sink, run, sink_dir, write_project

SCANNED = [n for n in tables() if n not in INCOMPLETE and n not in NO_KEY]
FORMATS = ("parquet", "csv", "avro")
FOLLOWED = sorted(n for n, first in CHANGE_DATA_FROM.items() if first == 0)
# What delta-rs can write to, and how each is changed: (a new row, the key column, a non-key column and a
# value for it, the partition column and another partition's value).
WRITTEN = {
    "rs__cdf-table": (
        {"id": 100, "name": "Zed", "birthday": dt.date(2023, 12, 24)},
        "id",
        "name",
        "Ned",
        "birthday",
        dt.date(2023, 12, 25),
    ),
    "rs__cdf-table-non-partitioned": (
        {
            "id": 100,
            "name": "Zed",
            "birthday": dt.date(2023, 12, 24),
            "long_field": 1,
            "boolean_field": True,
            "double_field": 0.5,
            "smallint_field": 2,
        },
        "name",
        "long_field",
        7,
        None,
        None,
    ),
    "rs__cdf-table-with-cdc-and-dvs": ({"id": 100, "comment": "new"}, "id", "comment", "changed", None, None),
    "handedited__escaped-chars-cdf": ({"_1": "zed", "_2": "bar+%25"}, "_1", None, None, "_2", "new/:=%"),
}


# Copies of tables without change data that get it turned on, then an update moving a row to another
# partition: a timestamp partition (Spark escapes its folder), and one of every partition value type.
TURNED_ON = {
    "golden__kernel-timestamp-INT96": ("id = 0", {"part": "'2021-10-01T08:09:20Z'"}),
    "golden__data-reader-partition-values": ("value = '0'", {"as_int": "7", "as_string": "'moved/:=%'"}),
}


def _logged() -> list[str]:
    """The tables without change data from their first version whose whole history is in the log (and more
    than one version): one turns its change data feed on in its third commit."""
    out = []
    for name in SCANNED:
        log = require() / name / "_delta_log"
        commits = {p.name[:20] for p in log.glob("*.json") if p.name[:20].isdigit()}
        late = CHANGE_DATA_FROM.get(name, 1) > 0
        if late and name not in TURNED_ON and f"{0:020d}" in commits and len(commits) > 1:
            try:
                DeltaSource(name, str(require() / name)).table(0)
            except SourceError:  # delta-rs cannot open its first version: nor can a feed follow it
                continue
            out.append(name)
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    require()
    base = tmp_path_factory.mktemp("corpus")
    entries = {ident(n): {"path": str(copy(n, base / "tables")), "primary_key": KEYS[n], "spans": 1} for n in SCANNED}
    names = {n: f"s.{ident(n)}" for n in SCANNED}
    for name in WRITTEN:  # the same table, its changes read from its log alone
        entries[f"{ident(name)}_log"] = {**entries[ident(name)], "changes": "log"}
    for name in TURNED_ON:
        DeltaTable(entries[ident(name)]["path"]).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    root = write_project(
        base / "p",
        entries,
        [
            {
                "name": "scans",
                "tables": [names[n] for n in SCANNED],
                "sink": "scans",
                "options": {"initial_scan": "only"},
            },
            {
                "name": "history",
                "tables": [names[n] for n in FOLLOWED],
                "sink": "history",
                "options": {"cursor": "2000-01-01T00:00:00Z", "updated": True, "diff": True},
            },
            {
                "name": "follow",
                "tables": [names[n] for n in sorted(CHANGE_DATA_FROM)],
                "sink": "follow",
                "options": {"updated": True},
            },
            {
                "name": "turned_on",
                "tables": [names[n] for n in TURNED_ON],
                "sink": "turned_on",
                "options": {"updated": True, "diff": True},
            },
            {
                "name": "from_log",
                "tables": [names[n] for n in _logged()],
                "sink": "from_log",
                "options": {"cursor": "2000-01-01T00:00:00Z", "updated": True, "diff": True},
            },
            *(
                {
                    "name": f"written_{how}",
                    "tables": [f"{names[n]}{suffix}" for n in sorted(WRITTEN)],
                    "sink": f"written_{how}",
                    "options": {"updated": True, "diff": True},
                }
                for how, suffix in (("cdf", ""), ("log", "_log"))
            ),
            *(
                {
                    "name": f"scans_{form}",
                    "tables": [names[n] for n in SCANNED],
                    "sink": f"scans_{form}",
                    "options": {"initial_scan": "only", "format": form},
                }
                for form in FORMATS
            ),
        ],
        [
            file_sink("scans"),
            file_sink("history"),
            file_sink("follow"),
            file_sink("turned_on"),
            file_sink("from_log"),
            file_sink("written_cdf"),
            file_sink("written_log"),
            *(file_sink(f"scans_{f}") for f in FORMATS),
        ],
    )
    results = run(root)
    assert not any(r.error for r in results.values()), {f: r.error for f, r in results.items() if r.error}
    return root, base / "tables"


def _afters(root, sink: str, table: str) -> list[dict]:
    """The `after` of every message of a table's topic."""
    return [
        line["after"]
        for f in read_sink(sink_dir(root, sink))
        if not f.resolved and f.topic == ident(table)
        for line in f.lines
    ]


def test_every_table_is_scanned_and_verified(project):
    root, _ = project
    assert_verified(root, "scans", *(f"scans_{form}" for form in FORMATS))


def test_tables_with_change_data_are_followed_from_before_their_first_version_and_verified(project):
    root, _ = project
    assert_verified(root, "history", "follow")


def test_tables_without_change_data_are_followed_from_their_log_and_verified(project):
    root, _ = project
    assert len(_logged()) >= 8
    assert {f.topic for f in read_sink(sink_dir(root, "from_log")) if f.topic} == {ident(n) for n in _logged()}
    assert_verified(root, "from_log")


def test_values_reach_the_sink_as_the_table_holds_them(project):
    root, _ = project
    # Spark's INT96 "valid to" dates, which nanoseconds would wrap around to 1816
    assert sorted(a["BIG_DATE"] for a in _afters(root, "scans", "rs__table_with_edge_timestamps")) == [
        "9999-12-30T00:00:00Z",
        "9999-12-31T00:00:00Z",
    ]
    # a negative decimal partition value
    assert "-2342342.23423" in [a["part"] for a in _afters(root, "scans", "golden__basic-decimal-table")]
    # maps with integer, boolean and float keys, as objects keyed by the keys' text
    maps = _afters(root, "scans", "golden__data-reader-map")
    assert len(maps) == 10 and all(
        m["a"] == {str(m["i"]): m["i"]} and m["e"] == {str(m["i"]): f"{m['i']}"} for m in maps
    ), maps[:2]
    # partition folders Spark escaped, followed from the log's paths
    ntz = _afters(root, "history", "handedited__timestamp_ntz-cdf")
    assert (
        sorted(a["tsNtzPartition"] for a in ntz if a["tsNtzPartition"])
        == ["2013-07-05T17:01:00.123456"] * 3 + ["2021-11-18T02:30:00.123456"] * 3
    )


@pytest.fixture(scope="module")
def changed(project):
    """The writable copies changed every way (the last, an overwrite without one row), the feeds run again."""
    root, folder = project
    for name, (row, key, column, value, partition, moved) in WRITTEN.items():
        path = str(folder / name)
        schema = pa.schema(DeltaTable(path).schema().to_arrow())
        write_deltalake(path, pa.Table.from_pylist([row], schema=schema), mode="append")
        table = DeltaTable(path)
        if column is not None:
            table.update(predicate=f"`{key}` = {_sql(row[key])}", updates={f"`{column}`": _sql(value)})
        if partition is not None:  # the row moves to another partition (another folder)
            DeltaTable(path).update(predicate=f"`{key}` = {_sql(row[key])}", updates={f"`{partition}`": _sql(moved)})
        second = {**row, key: _other(row[key])}
        write_deltalake(path, pa.Table.from_pylist([second], schema=schema), mode="append")
        DeltaTable(path).delete(f"`{key}` = {_sql(second[key])}")
        merged = pa.Table.from_pylist([row, {**row, key: _other(_other(row[key]))}], schema=schema)
        (
            DeltaTable(path)
            .merge(merged, predicate=f"t.`{key}` = s.`{key}`", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        DeltaTable(path).optimize.compact()
        added = {**row, key: _other(_other(_other(row[key]))), "note": "a column added"}
        write_deltalake(
            path,
            pa.Table.from_pylist([added], schema=schema.append(pa.field("note", pa.string()))),
            mode="append",
            schema_mode="merge",
        )
        current = DeltaSource(name, path).snapshot(DeltaTable(path).version()).read_all()
        kept = [r for r in current.to_pylist() if r[key] != row[key]]  # the overwrite leaves `row` out
        write_deltalake(path, pa.Table.from_pylist(kept, schema=current.schema), mode="overwrite")
    for name, (predicate, updates) in TURNED_ON.items():
        DeltaTable(str(folder / name)).update(predicate=predicate, updates=updates)
    results = run(root, "history", "follow", "turned_on", "written_cdf", "written_log")
    assert not any(r.error for r in results.values()), {f: r.error for f, r in results.items() if r.error}
    return root, folder


def test_changes_written_every_way_are_followed_and_verified(changed):
    root, _ = changed
    assert_verified(root, "history", "follow", "turned_on", "written_cdf", "written_log")

    def by_key(sink: str) -> dict:
        out = {}
        for m in messages(root, sink):
            out.setdefault(str(m["key"]), []).append((m["after"], m["before"]))
        return out

    assert by_key("written_log") == by_key("written_cdf")
    moved = [m for m in messages(root, "turned_on") if m.get("before")]
    assert sorted(
        (m["before"].get("part") or m["before"]["as_string"], m["after"].get("part") or m["after"]["as_string"])
        for m in moved
    ) == [("0", "moved/:=%"), ("2020-01-01T08:09:10.001Z", "2021-10-01T08:09:20Z")]
    keys = {str(m["key"]) for m in messages(root, "history")}
    for name, (row, key, *_rest) in WRITTEN.items():
        assert any(str(row[key]) in k for k in keys), name


def test_a_table_vacuumed_is_followed_on(changed):
    root, folder = changed
    name = "rs__cdf-table"
    path = str(folder / name)
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    row = {"id": 500, "name": "After", "birthday": dt.date(2023, 12, 29)}
    write_deltalake(
        path, pa.Table.from_pylist([row], schema=pa.schema(DeltaTable(path).schema().to_arrow())), mode="append"
    )
    results = run(root, "follow")
    assert not results["follow"].error, results["follow"].error
    assert {"id": 500, "name": "After", "birthday": "2023-12-29", "note": None} in [
        m.get("after") for m in messages(root, "follow")
    ]  # `note`: the column added before


def _sql(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (dt.date, Decimal)):
        return f"'{value}'"
    return str(value)


def _other(value):
    return value + 1 if isinstance(value, int) else f"{value}-2"
