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
    found = spans.Regions.of_spans("r", 2, [(0, "region=a"), (1, "region=a"), (2, None), (3, None), (4, "region=b"),
                                            (5, "region=b")])
    assert found.slots == {"a": 0, None: 1, "b": 2} and found.value(2) == "b"
    assert spans.Regions.home("b") == "region=b" and spans.Regions.home(None) is None


@pytest.mark.parametrize(("condition", "values", "expected"), [
    (None, {"us-east1"}, "`crdb_region` IN ('us-east1')"),
    ("`id` > 3", {"b", "a"}, "(`id` > 3) AND (`crdb_region` IN ('a', 'b'))"),
    (None, {None, "a"}, "`crdb_region` IN ('a') OR `crdb_region` IS NULL"),
    (None, {"o'hare"}, "`crdb_region` IN ('o\\'hare')")])
def test_a_node_reads_only_its_regions(condition, values, expected):
    assert with_regions(condition, "crdb_region", values) == expected
