"""A regional-by-row table's rows are spread over spans of their own region: a key's span is its region's
block plus the hash of the key, the same wherever and however often the batch is staged; a node reading its
regions narrows the reader's condition to them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from feedctl.compiler.pushdown import with_regions
from feedctl.source import spans


def test_a_key_lands_in_its_regions_block_of_spans_at_its_hashed_place():
    batch = pa.record_batch({"crdb_region": ["us-east1", "europe-west1", "us-east1", None], "id": [1, 2, 3, 4]})
    regions = spans.Regions("crdb_region", {"us-east1": 0, "europe-west1": 2, None: 1})
    plain = spans.of_batch(batch, ["crdb_region", "id"], 4)
    regional = spans.of_batch(batch, ["crdb_region", "id"], 4, regions)
    assert list(regional) == [plain[0], 8 + plain[1], plain[2], 4 + plain[3]]
    assert list(spans.of_batch(batch.slice(2), ["crdb_region", "id"], 4, regions)) == list(regional[2:])


def test_a_row_of_a_region_without_spans_is_refused_rather_than_emitted_by_no_one():
    batch = pa.record_batch({"crdb_region": ["us-east1", "mars"], "id": [1, 2]})
    with pytest.raises(spans.UnknownRegion, match="region 'mars' of column crdb_region has no spans"):
        spans.of_batch(batch, ["crdb_region", "id"], 2, spans.Regions("crdb_region", {"us-east1": 0}))


def test_regions_are_read_back_from_the_homes_of_their_spans():
    found = spans.Regions.of_spans(
        "r", 2, [(0, "region=a"), (1, "region=a"), (2, None), (3, None), (4, "region=b"), (5, "region=b")]
    )
    assert found.slots == {"a": 0, None: 1, "b": 2} and found.value(2) == "b"
    assert spans.Regions.home("b") == "region=b" and spans.Regions.home(None) is None


@pytest.mark.parametrize(
    ("condition", "values", "expected"),
    [
        (None, {"us-east1"}, "`crdb_region` IN ('us-east1')"),
        ("`id` > 3", {"b", "a"}, "(`id` > 3) AND (`crdb_region` IN ('a', 'b'))"),
        (None, {None, "a"}, "`crdb_region` IN ('a') OR `crdb_region` IS NULL"),
        (None, {"o'hare"}, "`crdb_region` IN ('o\\'hare')"),
    ],
)
def test_a_node_reads_only_its_regions(condition, values, expected):
    assert with_regions(condition, "crdb_region", values) == expected


def test_a_node_stages_only_its_regions_rows_opening_only_their_partitions(tmp_path):
    """A regional-by-row table partitioned by its region column: a node holding region b's spans stages b's
    changes, into b's block of spans, while the other regions' files are moved away (a reader opening one
    would fail)."""
    import shutil

    from deltalake import DeltaTable, write_deltalake

    from feedctl.source.delta import DeltaSource
    from feedctl.source.stage import Layout, Stager
    from feedctl.source.staging_area import StagingArea
    from feedctl.state.event_times import Recorded
    from feedctl.units import Hlc

    path = tmp_path / "vehicles"
    rows = pa.table({"crdb_region": [("a", "b", "c")[i % 3] for i in range(30)], "id": pa.array(range(30), pa.int64())})
    write_deltalake(str(path), rows, partition_by=["crdb_region"], configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(str(path)).delete("id < 6")
    table, per_region = "movr.vehicles", 2
    regions = spans.Regions("crdb_region", {"a": 0, "b": 1, "c": 2})
    stager = Stager(
        StagingArea(str(tmp_path / "stage")), 1, {table: DeltaSource(table, str(path))}, {table: per_region}, {}
    )
    layout = Layout(["crdb_region", "id"], regions)
    for region in ("a", "c"):
        for folder in (path, path / "_change_data"):
            shutil.move(folder / f"crdb_region={region}", tmp_path / f"away-{folder.name}-{region}")
    recorded = [Recorded(table, v, v * 1000, Hlc(v * 1000, 0), 10) for v in (0, 1)]
    staged = stager.stage(table, -1, 1, recorded, 1, layout, keep=[2, 3])
    assert staged.rows == 10 + 2  # b's ten inserts, and the deletes of ids 1 and 4
    assert set(staged.span_rows) <= {2, 3} and sum(staged.span_rows.values()) == staged.rows
