"""Tables as users have them, read by the reader without Spark: each version's changes, applied by key to the
snapshot before it, give the snapshot after it as delta-rs reads it, or delta-kernel-rs (polars-deltalake)
where delta-rs reads no deletion vector: oracles sharing no code with the reader. Whether read from change
data files or from the log."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from feedctl.source.change_source import ChangeSource
from feedctl.source.delta import DeltaSource
from feedctl.verify.second_reader import SecondReader
from support.corpus import KEYS, SPECIAL_FOLDER, with_absolute_deletion_vectors, with_renamed_column

# Removed from the key's row, then added: what each change type does to a snapshot.
_GONE = ("delete", "update_preimage")
_NEW = ("insert", "update_postimage")


def snapshot(path, version: int, key: str) -> dict:
    table = DeltaTable(str(path), version=version)
    if "deletionVectors" in (table.protocol().reader_features or ()):
        import polars_deltalake

        rows = polars_deltalake.scan_delta(str(path), version=version).collect().to_dicts()
    else:
        rows = table.to_pyarrow_table().to_pylist()
    return {r[key]: r for r in rows}


def applied(before: dict, changes: list[dict], key: str, columns: list[str]) -> dict:
    after = dict(before)
    for change in sorted(changes, key=lambda c: c["_change_type"] in _NEW):  # removals first
        row = {c: change[c] for c in columns}
        if change["_change_type"] in _GONE:
            assert after.pop(row[key]) == row, f"{change['_change_type']} of a row the snapshot does not hold"
        else:
            assert row[key] not in after, f"{change['_change_type']} of a key already there"
            after[row[key]] = row
    return after


def assert_changes_are_the_snapshots(path, key: str, source: ChangeSource, first: int = 1) -> int:
    """Every version's changes from `first` read with `source`, checked against the snapshots; the changes
    read."""
    reader = DeltaSource("s.t", str(path), changes=source)
    newest = DeltaTable(str(path)).version()
    columns = DeltaTable(str(path)).schema().to_arrow().names
    seen = 0
    for version in range(first, newest + 1):
        changes = reader.changes(version - 1, version).read_all().to_pylist()
        assert {c["_commit_version"] for c in changes} <= {version}
        expected = snapshot(path, version, key)
        assert applied(snapshot(path, version - 1, key), changes, key, columns) == expected, f"version {version}"
        seen += len(changes)
    return seen


NOT_NULL = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("point", pa.struct([pa.field("x", pa.int32(), nullable=False), pa.field("y", pa.int32())])),
        pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
    ]
)


def _not_null_rows(*ids: int) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "name": f"n{i}", "point": {"x": i, "y": None}, "tags": [f"t{i}"]} for i in ids], schema=NOT_NULL
    )


@pytest.mark.parametrize("change_data_feed", [True, False], ids=["change-data", "log"])
def test_a_table_with_not_null_columns_is_followed_through_appends_updates_and_deletes(tmp_path, change_data_feed):
    """NOT NULL columns (a top-level key, a struct's field, a list's elements): the table's schema says NOT
    NULL while a change data file's or a file read for a delete's Arrow schema may not; the changes of every
    version are read all the same, from change data files and from the log."""
    path = tmp_path / "t"
    write_deltalake(
        str(path),
        _not_null_rows(1, 2, 3),
        configuration={"delta.enableChangeDataFeed": str(change_data_feed).lower()},
    )
    assert not DeltaTable(str(path)).schema().to_arrow().field("id").nullable
    write_deltalake(str(path), _not_null_rows(4, 5), mode="append")
    DeltaTable(str(path)).update(predicate="id = 2", updates={"name": "'renamed'"})
    DeltaTable(str(path)).delete("id IN (3, 5)")
    write_deltalake(str(path), _not_null_rows(6), mode="append")
    source = ChangeSource.CDF if change_data_feed else ChangeSource.LOG
    assert assert_changes_are_the_snapshots(path, "id", source) >= 2 + 2 + 2 + 1
    # the whole range at once, as a batch of several versions reads it
    rows = DeltaSource("s.t", str(path), changes=source).changes(0, 4).read_all()
    assert rows.num_rows >= 7 and rows.column("id").null_count == 0


def test_deletion_vectors_stored_by_absolute_uri_outside_the_table_are_read(tmp_path):
    """Storage type `p` (Spark's shallow clones, vectors kept outside the table's root): a `file:` URI,
    percent-encoded, in a folder whose name holds a space, `&` and `%`."""
    name = "rs__cdf-table-with-cdc-and-dvs"
    path, folder = with_absolute_deletion_vectors(name, tmp_path)
    log = "".join(p.read_text() for p in (path / "_delta_log").glob("*.json"))
    assert folder.name == SPECIAL_FOLDER and '"storageType": "p"' in log and "%25" in log
    (key,) = KEYS[name]
    assert assert_changes_are_the_snapshots(path, key, ChangeSource.LOG) > 0
    newest = DeltaTable(str(path)).version()
    rows = DeltaSource("s.t", str(path)).snapshot(newest).read_all().to_pylist()
    assert {r[key]: r for r in rows} == snapshot(path, newest, key)


def test_a_key_renamed_under_column_mapping_is_found_under_its_name_at_each_version(tmp_path):
    """The key project.yml declares (`newcol1`, its name now) is, before the rename, the column of the same
    physical name (`col1`): the reader's changes there carry it, found by both readers apart."""
    path = with_renamed_column("golden__dv-with-columnmapping", "col1", "newcol1", tmp_path)
    renamed_at = DeltaTable(str(path)).version()
    source, second = DeltaSource("s.t", str(path), changes=ChangeSource.LOG), SecondReader("s.t", str(path), None)
    for version, names in ((renamed_at - 1, ["part", "col1"]), (renamed_at, ["part", "newcol1"])):
        assert source.names_at(version, ["part", "newcol1"]) == names
        assert second.names_at(version, ["part", "newcol1"]) == names
    assert source.names_at(0, ["part", "gone"]) == ["part", "gone"]  # not a column: left for the caller to find
    key = source.names_at(renamed_at - 1, ["newcol1"])
    changes = source.changes(0, renamed_at - 1, key=key).read_all()
    assert changes.num_rows and "newcol1" not in changes.column_names
    assert changes.column("col1").null_count == 0
