"""Changes of tables whose change data feed is off, read from the Delta log (`changes: log`): every version's
changes, once staged and paired as a feed's tasks pair them, are what comparing the table's snapshots before
and after the version gives, key by key. The snapshots are read by the second reader (`verify`), which shares
no code with the reader judged."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from feedctl import frame
from feedctl.source import rewrites
from feedctl.source.change_source import ChangeSource
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.source.stage import Staged, StagedSpans, VersionTimes, stage_changes
from feedctl.source.staging_area import StagingArea
from feedctl.tasks import pairing
from feedctl.units import Hlc
from feedctl.verify.second_reader import SecondReader
from support.corpus import CHANGE_DATA_FROM, INCOMPLETE, KEYS, NO_KEY, require, tables


def _canonical(v):
    """A value in a form equal for equal values only. A map is its sorted entries: Arrow gives a map's entries
    as (key, value) tuples, and one that went through polars (a list of key-value structs) as dicts."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else repr(v)
    if (
        isinstance(v, list)
        and v
        and all(isinstance(e, tuple) or isinstance(e, dict) and set(e) == {"key", "value"} for e in v)
    ):
        return sorted(
            json.dumps([_canonical(k), _canonical(x)])
            for k, x in (e if isinstance(e, tuple) else (e["key"], e["value"]) for e in v)
        )
    if isinstance(v, dict):
        return {k: _canonical(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_canonical(x) for x in v]
    return repr(v)


def _text(row: dict | None) -> str | None:
    return None if row is None else json.dumps(_canonical(row))


def stage(source: DeltaSource, version: int, key: list[str] | None, tmp_path) -> Staged:
    """The changes of `version` staged in one span, as a feed's stager stages them (given the key)."""
    times = VersionTimes([version], [Hlc(version + 1, 0)], [version])
    folder = tmp_path / f"staged-{version}-{key is not None}"
    reader = source.changes(version - 1, version, key=key)
    return stage_changes(reader, times, folder, lambda b: np.zeros(b.num_rows, "int32"))


def read_changes(source: DeltaSource, version: int, key: list[str], tmp_path) -> set[tuple]:
    """(key, op, after, before) of each change of `version`, as a feed's task gets it: staged in one span,
    read back in emission order, and paired."""
    staged = stage(source, version, key, tmp_path)
    if staged.path is None:
        return set()
    columns = source.schema(version).names
    out = set()
    for view in pairing.task_changes(
        StagedSpans(staged.path, staged.span_rows, StagingArea(str(staged.path))), 0, columns, key
    ):
        for row in view.to_arrow().to_pylist():
            op = row[frame.OP]
            after = None if op == "delete" else {c: row[c] for c in columns}
            out.add((_text(row[frame.KEY]), op, _text(after), _text(row[frame.PREV])))
    return out


def snapshot_diff(location: str, version: int, key: list[str]) -> set[tuple]:
    """(key, op, after, before) of each key whose row differs between the snapshots before and at `version`,
    the rows of both read with `version`'s columns (a column added since is null before it)."""
    reader = SecondReader("t", location, None)
    after = reader.rows(version).to_pylist()
    before = reader.rows(version - 1).to_pylist() if version > 0 else []
    columns = reader.rows(version).schema.names
    was = {_text({c: r[c] for c in key}): {c: r.get(c) for c in columns} for r in before}
    now = {_text({c: r[c] for c in key}): {c: r.get(c) for c in columns} for r in after}
    out = set()
    for k in was.keys() | now.keys():
        a, b = now.get(k), was.get(k)
        if a == b:
            continue
        op = "insert" if b is None else "delete" if a is None else "update"
        out.add((k, op, _text(a), _text(b)))
    return out


def _table(ids, region, amount):
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(region, pa.string()),
            "amount": pa.array(amount, pa.float64()),
        }
    )


def _history(path: str, change_data: bool) -> list[str]:
    """A table's life by delta-rs, one operation per version from 1 on; what each one was."""
    config = {"delta.enableChangeDataFeed": "true"} if change_data else None
    write_deltalake(
        path,
        _table([1, 2, 3, 4, 5, 6], ["eu", "eu", "us", "us", "us", "eu"], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        partition_by=["region"],
        configuration=config,
    )
    done = []
    write_deltalake(path, _table([7, 8], ["eu", "us"], [7.0, 8.0]), mode="append")
    done.append("append")
    DeltaTable(path).update({"amount": "amount + 100"}, predicate="id IN (2, 3)")
    done.append("update rewriting files")
    DeltaTable(path).delete("id = 4")
    done.append("delete")
    (
        DeltaTable(path)
        .merge(_table([5, 6, 9], ["us", "eu", "us"], [50.0, 0.0, 9.0]), "t.id = s.id", "s", "t")
        .when_matched_update_all(predicate="s.id = 5")
        .when_matched_delete(predicate="s.id = 6")
        .when_not_matched_insert_all()
        .execute()
    )
    done.append("merge")
    DeltaTable(path).optimize.compact()
    done.append("optimize")
    DeltaTable(path).update({"region": "'us'"}, predicate="id = 1")
    done.append("partition move")
    DeltaTable(path).update({"amount": "amount"}, predicate="id = 7")
    done.append("update to the same values")
    DeltaTable(path).update({"id": "70"}, predicate="id = 7")
    done.append("key change")
    write_deltalake(
        path,
        pa.table(
            {
                "id": pa.array([10], pa.int64()),
                "region": ["eu"],
                "amount": pa.array([10.0]),
                "note": ["new"],
            }
        ),
        mode="append",
        schema_mode="merge",
    )
    done.append("column added")
    write_deltalake(
        path,
        pa.table(
            {
                "id": pa.array([1, 2, 11], pa.int64()),
                "region": ["us", "eu", "eu"],
                "amount": pa.array([1.0, 999.0, 11.0]),
                "note": [None, None, "x"],
            }
        ),
        mode="overwrite",
    )
    done.append("overwrite")
    return done


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    root = tmp_path_factory.mktemp("log-changes")
    off, on = str(root / "off"), str(root / "on")
    done = _history(off, change_data=False)
    assert _history(on, change_data=True) == done
    return done, off, on


def test_each_version_read_from_the_log_is_the_difference_of_its_snapshots(histories, tmp_path):
    done, off, _ = histories
    source = DeltaSource("s.t", off, changes=ChangeSource.LOG)
    for version, what in enumerate(done, start=1):
        assert read_changes(source, version, ["id"], tmp_path) == snapshot_diff(off, version, ["id"]), what
    # what the history did, as a user would check it: an optimize changes nothing, nor does a row set to itself
    assert read_changes(source, done.index("optimize") + 1, ["id"], tmp_path) == set()
    assert read_changes(source, done.index("update to the same values") + 1, ["id"], tmp_path) == set()
    # the rows an update only carried over are not staged: 2 rows changed, a delete and an insert each
    update = done.index("update rewriting files") + 1
    assert stage(source, update, ["id"], tmp_path).rows == 4 < stage(source, update, None, tmp_path).rows
    moved = read_changes(source, done.index("partition move") + 1, ["id"], tmp_path)
    assert [(op, json.loads(before)["region"], json.loads(after)["region"]) for _, op, after, before in moved] == [
        ("update", "'eu'", "'us'")
    ]


def test_auto_reads_the_log_where_the_change_data_feed_is_off_and_refuses_nothing(histories, tmp_path):
    done, off, _ = histories
    auto = DeltaSource("s.t", off)
    assert auto.change_source == ChangeSource.AUTO
    auto.check_readable(0)
    for version in range(1, len(done) + 1):
        assert read_changes(auto, version, ["id"], tmp_path) == snapshot_diff(off, version, ["id"])
    cdf = DeltaSource("s.t", off, changes=ChangeSource.CDF)
    with pytest.raises(SourceError, match="change data feed enabled at version 0.*changes: log"):
        cdf.check_readable(0)
    with pytest.raises(SourceError, match="the change data feed is off at version 1"):
        cdf.changes(0, 1).read_all()


def test_the_log_and_the_change_data_feed_give_the_same_changes(histories, tmp_path):
    done, _, on = histories
    log, cdf = DeltaSource("s.t", on, changes=ChangeSource.LOG), DeltaSource("s.t", on, changes=ChangeSource.CDF)
    wrote_change_data = 0
    for version, what in enumerate(done, start=1):
        wrote_change_data += bool(cdf.reader().log.commit(version).cdc)
        assert read_changes(log, version, ["id"], tmp_path) == read_changes(cdf, version, ["id"], tmp_path), what
    assert wrote_change_data >= 3  # the update, delete and merge were read from change data files by `cdf`


@pytest.mark.parametrize("name", [t for t in tables() if t not in INCOMPLETE and t not in NO_KEY])
def test_every_version_of_the_corpus_read_from_the_log_is_the_difference_of_its_snapshots(name, tmp_path):
    path = str(require() / name)
    source = DeltaSource(name, path, changes=ChangeSource.LOG)
    log = require() / name / "_delta_log"
    commits = sorted({int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit()})
    read = []
    for version in commits:
        if not _opens(source, version) or version > 0 and not _opens(source, version - 1):
            continue  # gone from the log, or delta-rs cannot open it (nor can a feed)
        if version > 0 and source.schema(version) != source.schema(version - 1):
            continue  # a batch never spans a schema change; the snapshots' columns differ there
        read.append(version)
        assert read_changes(source, version, KEYS[name], tmp_path) == snapshot_diff(path, version, KEYS[name]), version
    assert read or name == "rs__delta-live-table", "no version of the table was compared"


def _opens(source: DeltaSource, version: int) -> bool:
    try:
        source.table(version)
    except SourceError:
        return False
    return True


def test_a_table_whose_change_data_feed_is_turned_on_late_is_followed_from_before_it(tmp_path):
    name = "handedited__vacuum-check-cdf"  # its change data feed is on from version 2
    assert CHANGE_DATA_FROM[name] == 2
    path = str(require() / name)
    auto = DeltaSource(name, path)
    everything = auto.changes(0, auto.latest_version()).read_all()
    by_version = [auto.changes(v - 1, v).read_all() for v in range(1, auto.latest_version() + 1)]
    assert everything.num_rows == sum(t.num_rows for t in by_version)  # no gap and no duplicate at 2
    for version in range(1, auto.latest_version() + 1):
        assert read_changes(auto, version, KEYS[name], tmp_path) == snapshot_diff(path, version, KEYS[name])


def test_only_a_row_carried_over_as_it_was_under_a_key_held_once_is_left_out():
    before = pa.record_batch({"id": [1, 2, 3, 3, None], "v": [1.0, 2.0, 3.0, 3.0, float("nan")]})
    after = pa.record_batch({"id": [1, 2, 3, 3, None], "v": [1.0, 20.0, 3.0, 3.0, float("nan")]})
    pieces = [("delete", before), ("insert", after)]
    out = [(kind, row) for kind, b in rewrites.without_unchanged(pieces, ["id"]) for row in b.to_pylist()]
    # 1 carried over; 2 changed; 3 held twice (left to the tasks); a null key matches a null key
    kept = sorted((kind, row["id"]) for kind, row in out if row["id"] is not None)
    assert kept == [("delete", 2), ("delete", 3), ("delete", 3), ("insert", 2), ("insert", 3), ("insert", 3)]
    # too large to hold: streamed on as it is
    assert list(rewrites.without_unchanged(pieces, ["id"], held_bytes=1)) == pieces


def test_a_rewrite_whose_removed_files_are_vacuumed_fails_naming_the_versions(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _table([1, 2], ["eu", "eu"], [1.0, 2.0]))
    DeltaTable(path).update({"amount": "amount + 1"}, predicate="id = 1")
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(SourceError, match=r"table s\.t: cannot read changes of versions 1\.\.1: a data file is gone"):
        DeltaSource("s.t", path, changes=ChangeSource.LOG).changes(0, 1, key=["id"]).read_all()


def test_auto_reads_the_log_before_the_change_data_feed_is_turned_on_and_its_change_data_after(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _table([1, 2, 3], ["eu", "eu", "us"], [1.0, 2.0, 3.0]))
    DeltaTable(path).update({"amount": "amount + 1"}, predicate="id = 1")  # 1: from the log
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})  # 2: N
    DeltaTable(path).update({"amount": "amount + 1"}, predicate="id = 2")  # 3: change data files
    DeltaTable(path).delete("id = 3")  # 4
    write_deltalake(path, _table([4], ["us"], [4.0]), mode="append")  # 5
    auto = DeltaSource("s.t", path)
    assert [bool(auto.reader().log.commit(v).cdc) for v in range(1, 6)] == [False, False, True, True, False]
    for version in range(1, 6):
        assert read_changes(auto, version, ["id"], tmp_path) == snapshot_diff(path, version, ["id"]), version
    whole = auto.changes(0, 5, key=["id"]).read_all()
    assert whole.num_rows == sum(auto.changes(v - 1, v, key=["id"]).read_all().num_rows for v in range(1, 6))
    assert sorted(whole.column("_change_type").to_pylist()) == sorted(
        ["delete", "insert", "update_preimage", "update_postimage", "delete", "insert"]
    )
