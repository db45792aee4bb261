"""VARIANT values the encoding does not allow fail naming table, version and column; the JSON text of
numbers is Java's (Spark prints them so); a CDC query's VARIANT outputs are those passing one through."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feedctl.source.delta import DeltaSource, SourceError
from feedctl.source.variant import double_text, float_text
from feedctl.tasks.query import json_outputs
from feedctl.verify.variant_values import _java


def _variant_table(path, metadata: bytes, value: bytes):
    (path / "_delta_log").mkdir(parents=True)
    rows = pa.table({"id": [1], "v": pa.array([{"metadata": metadata, "value": value}])})
    pq.write_table(rows, path / "part-0.parquet")
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "variant", "nullable": True, "metadata": {}},
        ],
    }
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
    protocol.update(readerFeatures=["variantType"], writerFeatures=["variantType"])
    actions = [
        {"commitInfo": {"timestamp": 1795537907200, "operation": "WRITE"}},
        {"protocol": protocol},
        {
            "metaData": {
                "id": "t",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1795537907200,
            }
        },
        {
            "add": {
                "path": "part-0.parquet",
                "partitionValues": {},
                "size": (path / "part-0.parquet").stat().st_size,
                "modificationTime": 1795537907200,
                "dataChange": True,
            }
        },
    ]
    (path / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return DeltaSource("s.t", str(path))


EMPTY = bytes([0x01, 0x00, 0x00])  # version 1, no keys


def test_a_well_formed_variant_is_its_json(tmp_path):
    # An object {"a": 5}: key "a" in the dictionary; one field of id 0 at offset 0, an int8 5.
    metadata = bytes([0x01, 0x01, 0x00, 0x01]) + b"a"
    value = bytes([0x02, 0x01, 0x00, 0x00, 0x02, 0x0C, 0x05])
    assert _variant_table(tmp_path / "t", metadata, value).snapshot(0).read_all()["v"].to_pylist() == ['{"a":5}']


@pytest.mark.parametrize(
    "metadata, value, words",
    [
        (bytes([0x02, 0x00, 0x00]), bytes([0x00]), "metadata of version 2"),
        (EMPTY, bytes([0x54]), "a primitive of type 21"),
        (EMPTY, bytes([0x02, 0x01, 0x00, 0x00, 0x02, 0x0C, 0x05]), "key id 0 past the metadata's 0 keys"),
        (EMPTY, bytes([0x40, 0x10]), "bytes end"),
    ],
    ids=["metadata-version", "unknown-type", "key-id", "truncated"],
)
def test_a_malformed_variant_fails_naming_table_version_and_column(tmp_path, metadata, value, words):
    source = _variant_table(tmp_path / "t", metadata, value)
    with pytest.raises(SourceError, match=f"table s.t: cannot read version 0: column v: .*{words}"):
        source.snapshot(0).read_all()


@pytest.mark.parametrize(
    "x, java",
    [
        (1.25e10, "1.25E10"),
        (100.0, "100.0"),
        (1e-5, "1.0E-5"),
        (0.001, "0.001"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (-2.5e-7, "-2.5E-7"),
        (123.456, "123.456"),
        (1e300, "1.0E300"),
        (0.0, "0.0"),
    ],
)
def test_doubles_are_printed_as_java_prints_them_by_both_decoders(x, java):
    assert double_text(x) == java
    assert _java(x) == java


def test_a_float_keeps_its_own_shortest_digits():
    assert float_text(0.10000000149011612) == "0.1"
    assert float_text(16777216.0) == "1.6777216E7"


def test_the_variant_outputs_of_a_cdc_query_are_those_passing_one_through():
    columns = ["id", "v", "w"]
    assert json_outputs(None, columns, ("v",)) == ("v",)
    assert json_outputs("SELECT * FROM s.t", columns, ("v",)) == ("v",)
    sql = "SELECT id, t.v AS payload, get_json_object(v, '$.a') AS a, w AS v FROM s.t AS t"
    assert json_outputs(sql, columns, ("v",)) == ("payload",)
    assert json_outputs(sql, columns, ()) == ()
