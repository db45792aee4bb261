"""A pushed-down condition as the reader applies it: rows filtered exactly, files skipped only when their
partition values or statistics rule every row out (never a file that may hold a row the condition keeps)."""

from __future__ import annotations

import json

import pyarrow as pa

from feedctl.source import reader_filter

SCHEMA = pa.schema(
    [("id", pa.string()), ("n", pa.int64()), ("region", pa.string()), ("at", pa.timestamp("us", tz="UTC"))]
)


def may(text: str, partition_values: dict | None = None, **stats) -> bool:
    bounds = {"minValues": {k: v[0] for k, v in stats.items()}, "maxValues": {k: v[1] for k, v in stats.items()}}
    return reader_filter.may_match(
        reader_filter.parse(text), SCHEMA, {}, {"region"}, partition_values or {}, json.dumps(bounds)
    )


def test_rows_are_filtered_exactly():
    rows = pa.table(
        {
            "id": ["a", "b", "c"],
            "n": [1, 2, None],
            "region": ["eu", None, "us"],
            "at": pa.array([0, 10**6, 2 * 10**6], pa.timestamp("us", tz="UTC")),
        }
    )
    where = reader_filter.expression(
        reader_filter.parse(
            "(`region` IN ('eu', 'us') OR `region` IS NULL) AND `n` BETWEEN 1 AND 2 AND `at` < '1970-01-01 00:00:01.5'"
        ),
        rows.schema,
    )
    assert rows.filter(where)["id"].to_pylist() == ["a", "b"]


def test_partition_values_rule_files_out():
    assert not may("`region` = 'eu'", {"region": "us"})
    assert may("`region` = 'eu'", {"region": "eu"})
    assert not may("`region` = 'eu'", {"region": None})  # a null partition holds no 'eu'
    assert may("`region` IS NULL", {"region": None}) and not may("`region` IS NULL", {"region": "eu"})


def test_statistics_rule_files_out_conservatively():
    assert not may("`n` > 10", n=(1, 10)) and may("`n` >= 10", n=(1, 10))
    assert not may("`n` IN (0, 11)", n=(1, 10)) and may("`n` IN (0, 5)", n=(1, 10))
    # string bounds are cut to a prefix: a value past the cut maximum may still be in the file
    assert may("`id` = 'abcdef'", id=("aaa", "abc"))
    assert not may("`id` = 'abd'", id=("aaa", "abc"))
    # timestamp statistics are cut to milliseconds: the maximum covers the rest of its millisecond
    assert may("`at` > '2024-01-01 00:00:00.000500'", at=("2023-01-01T00:00:00.000Z", "2024-01-01T00:00:00.000Z"))
    assert not may("`at` > '2024-01-01 00:00:00.001'", at=("2023-01-01T00:00:00.000Z", "2024-01-01T00:00:00.000Z"))


def test_what_cannot_be_evaluated_rules_nothing_out_and_filters_nothing():
    for text in ("`n` = 'x'", "upper(`id`) = 'A'", "`n` + 1 = 2", "not sql ((("):
        tree = reader_filter.parse(text)
        assert reader_filter.expression(tree, SCHEMA) is None
        assert reader_filter.may_match(
            tree, SCHEMA, {}, {"region"}, {}, json.dumps({"minValues": {"n": 5}, "maxValues": {"n": 6}})
        )
