"""Pairing a commit's before and after images of a key into one change (no Spark: the task's side alone)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedctl import frame
from feedctl.frame import PREV
from feedctl.source import spans as spans_of
from feedctl.source.stage import VersionTimes, span_file, stage_changes
from feedctl.tasks import pairing
from feedctl.units import Hlc

COLUMNS = ["id", "v"]


def cdf(*rows: tuple) -> pa.Table:
    """Change-feed rows (id, v, change type, version), in the order a span's task sorts them: (time, key, version)."""
    ordered = sorted(rows, key=lambda r: (r[3], r[0]))
    return pa.table(
        {
            "id": pa.array([r[0] for r in ordered], pa.int64()),
            "v": pa.array([r[1] for r in ordered], pa.string()),
            pairing.CHANGE_TYPE: [r[2] for r in ordered],
            pairing.VERSION: pa.array([r[3] for r in ordered], pa.int64()),
            frame.SPAN: pa.array([0] * len(ordered), pa.int32()),
            frame.TS_WALL: pa.array([r[3] * 1000 for r in ordered], pa.int64()),
            frame.TS_LOGICAL: pa.array([0] * len(ordered), pa.int32()),
            frame.MVCC_WALL: pa.array([r[3] * 1000 for r in ordered], pa.int64()),
        }
    )


def changes(table: pa.Table, cuts: list[int] = ()) -> list[tuple]:
    """(version, op, id, v after, v before) of each change, the rows fed in batches cut at `cuts`."""
    bounds = [0, *cuts, table.num_rows]
    pieces = [pl.from_arrow(table.slice(start, stop - start)) for start, stop in zip(bounds, bounds[1:])]
    out = []
    for view in pairing.changes(pieces, COLUMNS, ["id"]):
        for row in view.to_dicts():
            before = row[PREV]["v"] if row[PREV] is not None else None
            out.append((row[frame.TS_WALL] // 1000, row[frame.OP], row["id"], row["v"], before))
    return out


def view(table: pa.Table):
    return pl.concat(pairing.changes([pl.from_arrow(table)], COLUMNS, ["id"]))


def test_inserts_updates_and_deletes():
    table = cdf(
        (1, "a", "insert", 1),
        (2, "b", "insert", 1),
        (1, "a", "update_preimage", 2),
        (1, "a2", "update_postimage", 2),
        (2, "b", "delete", 2),
    )
    assert changes(table) == [
        (1, "insert", 1, "a", None),
        (1, "insert", 2, "b", None),
        (2, "update", 1, "a2", "a"),
        (2, "delete", 2, None, "b"),
    ]


def test_a_primary_key_change_is_a_delete_and_an_insert():
    table = cdf((1, "a", "update_preimage", 2), (5, "a", "update_postimage", 2))
    assert changes(table) == [(2, "delete", 1, None, "a"), (2, "insert", 5, "a", None)]


def test_a_rewritten_file_is_no_change_but_a_changed_row_in_it_is():
    """delta-rs rewrites a file for an UPDATE without writing change data: each row reads as a delete and
    an insert; identical ones are no change."""
    table = cdf((1, "a", "delete", 2), (1, "a", "insert", 2), (2, "b", "delete", 2), (2, "b2", "insert", 2))
    assert changes(table) == [(2, "update", 2, "b2", "b")]


def test_two_after_images_of_a_key_in_one_commit_the_greatest_wins_whatever_their_order():
    for rows in [((1, "x", "insert", 1), (1, "y", "insert", 1)), ((1, "y", "insert", 1), (1, "x", "insert", 1))]:
        assert changes(cdf(*rows)) == [(1, "insert", 1, "y", None)]


def test_a_delete_keeps_only_its_key():
    deleted = view(cdf((3, "c", "delete", 4)))
    assert deleted["v"].to_list() == [None] and deleted[frame.KEY].to_list() == [{"id": 3}]


def test_messages_without_a_query_carry_every_column_after_and_before_with_diff():
    changed = view(cdf((1, "a", "update_preimage", 2), (1, "b", "update_postimage", 2), (2, "c", "delete", 2)))
    out = pairing.messages(changed, COLUMNS, diff=True)
    assert out[frame.AFTER].to_list() == [{"id": 1, "v": "b"}, None]
    assert out[frame.BEFORE].to_list() == [{"id": 1, "v": "a"}, {"id": 2, "v": "c"}]
    assert frame.BEFORE not in pairing.messages(changed, COLUMNS, diff=False).columns


def stage(folder, rows: list[tuple], spans: int):
    """Raw change-feed rows (id, v, change type, version) staged as the coordinator stages them."""
    raw = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": [r[1] for r in rows],
            pairing.CHANGE_TYPE: [r[2] for r in rows],
            pairing.VERSION: pa.array([r[3] for r in rows], pa.int64()),
            "_commit_timestamp": pa.array([0] * len(rows), pa.timestamp("us")),
        }
    )
    versions = sorted({r[3] for r in rows})
    times = VersionTimes(versions, [Hlc(v * 1000, 0) for v in versions], [v * 1000 for v in versions])
    return stage_changes(
        pa.RecordBatchReader.from_batches(raw.schema, raw.to_batches(max_chunksize=3)),
        times,
        folder,
        partial(spans_of.of_batch, key=["id"], spans=spans),
    )


def test_a_span_task_reads_its_own_staged_file_sorts_and_pairs_it(tmp_path):
    rows = (
        [(k, f"v{k}", "insert", 1) for k in range(20, 0, -1)]
        + [(k, f"v{k}", "update_preimage", 2) for k in range(1, 21, 3)]
        + [(k, f"w{k}", "update_postimage", 2) for k in range(1, 21, 3)]
    )
    staged = stage(tmp_path / "staged", rows, spans=3)
    assert staged.rows == len(rows)
    seen = []
    for span in range(3):
        path = Path(span_file(staged.path, span))
        ids = pq.read_table(path)["id"].to_pylist() if path.exists() else []
        batch = pa.record_batch({"id": pa.array(ids, pa.int64())})
        assert list(spans_of.of_batch(batch, ["id"], 3)) == [span] * len(ids), "a row staged in another span"
        schema = pairing.view_schema(staged.schema, COLUMNS, ["id"])
        task = [pa.record_batch({"id": pa.array([span], pa.int64())})]
        out = pa.Table.from_batches(list(pairing.view_partition(task, staged.spans(), COLUMNS, ["id"], schema)), schema)
        changes = list(zip(out[frame.TS_WALL].to_pylist(), out[frame.OP].to_pylist(), out["id"].to_pylist()))
        assert changes == sorted(changes), "a span's changes come in (time, key) order"
        seen.extend(changes)
    assert len({span for span in range(3) if Path(span_file(staged.path, span)).exists()}) > 1
    assert sorted(seen) == sorted(
        [(1000, "insert", k) for k in range(1, 21)] + [(2000, "update", k) for k in range(1, 21, 3)]
    )


def test_a_key_keeps_its_span_whatever_the_batch_it_comes_in():
    keys = pa.record_batch({"id": pa.array(range(1000), pa.int64()), "s": [f"k{i}" for i in range(1000)]})
    whole = spans_of.of_batch(keys, ["id", "s"], 7)
    assert list(spans_of.of_batch(keys.slice(500), ["id", "s"], 7)) == list(whole[500:])
    counts = [int((whole == span).sum()) for span in range(7)]
    assert min(counts) > 100, counts  # spread over every span


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 6),
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(["insert", "delete", "update_preimage", "update_postimage"]),
            st.integers(1, 4),
        ),
        min_size=1,
        max_size=40,
    ),
    st.data(),
)
def test_changes_do_not_depend_on_how_rows_are_split_into_batches(rows, data):
    table = cdf(*rows)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, table.num_rows - 1)), max_size=5)))
    assert changes(table, [c for c in cuts if c < table.num_rows]) == changes(table)
    # one change at most per key and version, in (version, key) order
    keys = [(version, key) for version, op, key, _, _ in changes(table)]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_a_not_null_field_of_a_struct_column_survives_inserts_and_deletes(tmp_path):
    """A delete nulls the row's columns and an insert the previous row: the view's schema lets every level
    be null, whatever the table declares."""
    point = pa.struct([pa.field("x", pa.int64(), nullable=False)])
    raw = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "p": pa.array([{"x": 1}, {"x": 2}], point),
            pairing.CHANGE_TYPE: ["insert", "delete"],
            pairing.VERSION: pa.array([1, 1], pa.int64()),
            "_commit_timestamp": pa.array([0, 0], pa.timestamp("us")),
        }
    )
    times = VersionTimes([1], [Hlc(1000, 0)], [1000])
    staged = stage_changes(
        pa.RecordBatchReader.from_batches(raw.schema, raw.to_batches()),
        times,
        tmp_path / "staged",
        partial(spans_of.of_batch, key=["id"], spans=1),
    )
    schema = pairing.view_schema(staged.schema, ["id", "p"], ["id"])
    task = [pa.record_batch({"id": pa.array([0], pa.int64())})]
    out = pa.Table.from_batches(list(pairing.view_partition(task, staged.spans(), ["id", "p"], ["id"], schema)), schema)
    assert out.select(["id", "p", frame.OP]).to_pylist() == [
        {"id": 1, "p": {"x": 1}, frame.OP: "insert"},
        {"id": 2, "p": None, frame.OP: "delete"},
    ]
    assert out[PREV].to_pylist() == [None, {"id": 2, "p": {"x": 2}}]


def nested(rows: list[tuple]) -> pl.DataFrame:
    """(id, tags, change type) rows of one commit, in the given order."""
    n = len(rows)
    return pl.DataFrame(
        {
            "id": pl.Series([r[0] for r in rows], dtype=pl.Int64),
            "tags": pl.Series([r[1] for r in rows]),
            pairing.CHANGE_TYPE: [r[2] for r in rows],
            pairing.VERSION: pl.Series([1] * n, dtype=pl.Int64),
            frame.SPAN: pl.Series([0] * n, dtype=pl.Int32),
            frame.TS_WALL: pl.Series([1000] * n, dtype=pl.Int64),
            frame.TS_LOGICAL: pl.Series([0] * n, dtype=pl.Int32),
            frame.MVCC_WALL: pl.Series([1000] * n, dtype=pl.Int64),
        }
    )


@settings(max_examples=40, deadline=None)
@given(st.permutations([(1, [2], "insert"), (1, [1], "insert"), (1, [1], "delete"), (1, [2], "delete")]))
def test_rows_differing_only_in_nested_columns_pair_the_same_in_any_order(rows):
    """Two after and two before images of one key in one commit (a rewritten file holding the key twice):
    the greatest of each side wins, whatever order the files were read in, so this is no change at all."""
    assert pairing.pair(nested(rows), ["id", "tags"], ["id"]).height == 0
    afters = [r for r in rows if r[2] == "insert"]
    view = pairing.pair(nested(afters), ["id", "tags"], ["id"])
    assert view["tags"].to_list() == [[2]] and view[frame.OP].to_list() == ["insert"]


def test_a_staged_span_that_cannot_be_read_fails_the_task_rather_than_reading_as_no_change(tmp_path):
    from feedctl.source.stage import StagingError

    rows = [(k, f"v{k}", "insert", 1) for k in range(1, 21)]
    staged = stage(tmp_path / "staged", rows, spans=25)
    spans = staged.spans()
    assert sum(spans.span_rows.values()) == 20 and len(spans.span_rows) > 1
    empty = [s for s in range(25) if s not in spans.span_rows]
    assert empty
    for span in empty:  # a span the batch staged nothing for reads as no change
        assert list(pairing.task_changes(spans, span, COLUMNS, ["id"])) == []
    lost, short = sorted(spans.span_rows)[:2]
    Path(span_file(staged.path, lost)).unlink()  # what an executor sees when the staging folder is the driver's disk
    with pytest.raises(StagingError, match=f"span {lost}: its {spans.span_rows[lost]} staged changes cannot be read"):
        list(pairing.task_changes(spans, lost, COLUMNS, ["id"]))
    pq.write_table(pq.read_table(span_file(staged.path, short)).slice(1), span_file(staged.path, short))
    with pytest.raises(StagingError, match=f"span {short}: {spans.span_rows[short] - 1} staged changes"):
        list(pairing.task_changes(spans, short, COLUMNS, ["id"]))
