"""Tables as users have them, followed by `feedctl run` and judged by `feedctl verify` and by the tables' own
snapshots (`support.e2e.Table.changes`, delta-rs's reading, or delta-kernel-rs's where delta-rs reads no
deletion vector; never feedctl's): a table with NOT NULL columns, from its change data files and from its log;
corpus tables whose deletion vectors are stored by absolute URI outside the table, and whose key column was
renamed under column mapping, followed from before their first version."""

from __future__ import annotations

from deltalake import DeltaTable

from support.corpus import KEYS, with_absolute_deletion_vectors, with_renamed_column
from support.e2e import Table, assert_verified, check_changes, file_sink, messages, run, write_project

COLUMNS = {"id": "int64", "name": "string", "v": "int64"}


def rows(*ids: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "v": i} for i in ids]


def test_a_table_with_not_null_columns_is_followed_from_its_change_data_and_from_its_log(tmp_path):
    """Spark and Databricks write NOT NULL for every `NOT NULL` column, identity column and primary key: the
    first commit after the initial scan is read, and every one after it, from either source."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3, 4), not_null=("id", "name"))
    options = {"updated": True, "diff": True, "batch_rows": 3}
    root = write_project(
        tmp_path / "p",
        {
            "cdf": {"path": str(t.path), "primary_key": ["id"], "spans": 2, "changes": "cdf"},
            "log": {"path": str(t.path), "primary_key": ["id"], "spans": 2, "changes": "log"},
        },
        [{"name": f"f_{n}", "tables": [f"s.{n}"], "sink": f"out_{n}", "options": options} for n in ("cdf", "log")],
        [file_sink(f"out_{n}") for n in ("cdf", "log")],
    )
    assert {r.status for r in run(root).values()} == {"running"}
    t.append(rows(5, 6))
    t.update("id IN (1, 5)", v="v + 10")
    t.delete("id IN (2, 6)")
    t.append(rows(7))
    results = run(root)
    assert {r.status for r in results.values()} == {"running"}, {f: r.error for f, r in results.items()}
    expected = [(0, k, None, r) for k, r in t.snapshot(0).items()] + t.changes(0)
    for sink in ("out_cdf", "out_log"):
        check_changes(messages(root, sink), expected, t)
    assert_verified(root, "f_cdf", "f_log")


def newest_rows(path) -> list[dict]:
    """The table's newest rows as delta-kernel-rs reads them."""
    import polars_deltalake

    return polars_deltalake.scan_delta(str(path)).collect().to_dicts()


def latest_by_key(emitted: list[dict]) -> dict:
    """Each key's last message: the table's newest row, or None where it was deleted."""
    last = {}
    for m in sorted(emitted, key=lambda m: m["updated"]):
        last[tuple(m["key"])] = m["after"]
    return {k: v for k, v in last.items() if v is not None}


def follow_from_before_the_first_version(tmp_path, path, key: str):
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(path), "primary_key": [key], "spans": 2, "changes": "log"}},
        [
            {
                "name": "f",
                "tables": ["s.t"],
                "sink": "out",
                "options": {"cursor": "2000-01-01T00:00:00Z", "updated": True},
            }
        ],
        [file_sink("out")],
    )
    results = run(root)
    assert results["f"].status == "running", results["f"].error
    assert_verified(root, "f")
    return messages(root, "out")


def test_deletion_vectors_stored_by_absolute_uri_are_followed_through_the_history(tmp_path):
    name = "rs__cdf-table-with-cdc-and-dvs"
    path, _ = with_absolute_deletion_vectors(name, tmp_path)
    (key,) = KEYS[name]
    emitted = follow_from_before_the_first_version(tmp_path, path, key)
    assert latest_by_key(emitted) == {(r[key],): r for r in newest_rows(path)}


def test_a_key_renamed_under_column_mapping_is_followed_across_the_rename(tmp_path):
    """Databricks' `ALTER TABLE ... RENAME COLUMN col1 TO newcol1`, the key declared as `newcol1`: the history
    before the rename is the same column under its old name. Messages carry each row as its version names
    it: `col1` before the rename; at the rename (a column dropped and one added, under column mapping) the
    table again, under `newcol1` (`schema_change_policy: backfill`, the default); the key alike throughout."""
    path = with_renamed_column("golden__dv-with-columnmapping", "col1", "newcol1", tmp_path)
    renamed_at = DeltaTable(str(path)).version()
    emitted = follow_from_before_the_first_version(tmp_path, path, "newcol1")
    before = [m for m in emitted if m["after"] is None or "col1" in m["after"]]
    after = [m for m in emitted if m["after"] is not None and "newcol1" in m["after"]]
    assert before and after and len(before) + len(after) == len(emitted)
    assert all(m["key"] == [m["after"]["col1"]] for m in before if m["after"] is not None)
    assert all(m["key"] == [m["after"]["newcol1"]] for m in after)
    assert max(m["updated"] for m in before) < min(m["updated"] for m in after)
    newest = {(r["newcol1"],): r for r in newest_rows(path)}
    assert {tuple(m["key"]): m["after"] for m in after} == newest, f"version {renamed_at}: the table, backfilled"
