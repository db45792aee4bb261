"""Tables as users have them, followed by `feedctl run` and judged by `feedctl verify` and by the tables' own
snapshots (`support.e2e.Table.changes`, delta-rs's reading, never feedctl's): a table with NOT NULL columns,
from its change data files and from its log."""

from __future__ import annotations

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
