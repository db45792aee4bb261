"""Avro files hold every value exactly: decimals whose unscaled value has its top bit set (which polars'
Avro writer would write without their sign byte, reading back negative) are written as their text; maps are
Avro maps, read by the Avro project's own reader."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import polars as pl
import pyarrow as pa

from feedctl import frame
from feedctl.encoding.avro import avro_bytes, avro_frame, read_avro
from feedctl.encoding.envelope import Envelope


def test_decimals_read_back_as_written():
    values = [Decimal("22222.22222"), Decimal("-99999.99999"), Decimal("0.00001"), None]
    after = pl.DataFrame({"d": values}, schema={"d": pl.Decimal(10, 5)}).select(pl.struct("d").alias(frame.AFTER))
    df = after.with_columns(pl.struct(pl.lit(1).alias("id")).alias(frame.KEY))
    data = avro_bytes([avro_frame(df, Envelope("wrapped"))], "t", None)
    read = pl.read_avro(io.BytesIO(data))["after"].struct.field("d").to_list()
    assert read == ["22222.22222", "-99999.99999", "0.00001", None]


def _read_by_the_avro_project(data: bytes) -> tuple[dict, list[dict]]:
    """The writer's schema and the records, as the Avro project's own reader reads them (not the writer's)."""
    import warnings

    import avro.datafile
    import avro.io

    with warnings.catch_warnings():  # it knows no local-timestamp-micros, and reads it as the long it is
        warnings.simplefilter("ignore")
        reader = avro.datafile.DataFileReader(io.BytesIO(data), avro.io.DatumReader())
        return json.loads(reader.meta["avro.schema"]), list(reader)


def test_maps_are_avro_maps_keyed_by_the_text_of_their_keys_at_any_depth():
    table = pa.table(
        {
            "id": [1, 2, 3],
            "by_int": pa.array([[(1, "a"), (2, None)], None, []], pa.map_(pa.int64(), pa.string())),
            "by_time": pa.array(
                [[(dt.datetime(2020, 1, 2, 3, 4, 5, 6), Decimal("1.50"))], [], None],
                pa.map_(pa.timestamp("us"), pa.decimal128(5, 2)),
            ),
            "nested": pa.array(
                [{"inner": [("k", {"x": 1})]}, None, {"inner": None}],
                pa.struct([("inner", pa.map_(pa.string(), pa.struct([("x", pa.int32())])))]),
            ),
            "listed": pa.array([[[("a", 1.5)]], [None, []], None], pa.list_(pa.map_(pa.string(), pa.float64()))),
        }
    )
    df = pl.from_arrow(table)
    df = df.select(pl.struct(df.columns).alias(frame.AFTER), pl.struct("id").alias(frame.KEY))
    data = avro_bytes([avro_frame(df, Envelope("wrapped"))], "s.t", "gzip")

    schema, records = _read_by_the_avro_project(data)
    [after] = [f["type"][1] for f in schema["fields"] if f["name"] == "after"]
    types = {f["name"]: f["type"][1] for f in after["fields"]}
    assert types["by_int"] == {"type": "map", "values": ["null", "string"]}
    assert types["by_time"] == {"type": "map", "values": ["null", "string"]}  # decimals as their text
    assert types["listed"]["items"][1]["type"] == "map"
    assert [r["after"] for r in records] == [
        {
            "id": 1,
            "by_int": {"1": "a", "2": None},
            "by_time": {"2020-01-02T03:04:05.000006": "1.50"},
            "nested": {"inner": {"k": {"x": 1}}},
            "listed": [{"a": 1.5}],
        },
        {"id": 2, "by_int": None, "by_time": {}, "nested": None, "listed": [None, {}]},
        {"id": 3, "by_int": {}, "by_time": None, "nested": {"inner": None}, "listed": None},
    ]
    assert [r["key"] for r in records] == [{"id": 1}, {"id": 2}, {"id": 3}]

    # and feedctl's own reader (verify's) reads each map back as its entries
    read = read_avro(data)["after"].struct.field("by_int").to_list()
    assert read == [[{"key": "1", "value": "a"}, {"key": "2", "value": None}], None, []]


def test_a_file_without_maps_is_read_as_polars_wrote_it():
    df = pl.DataFrame({"v": [1, None]}).select(pl.struct("v").alias(frame.AFTER), pl.struct("v").alias(frame.KEY))
    data = avro_bytes([avro_frame(df, Envelope("wrapped"))], "t", None)
    schema, records = _read_by_the_avro_project(data)
    assert [r["after"] for r in records] == [{"v": 1}, {"v": None}]
    assert read_avro(data).equals(pl.read_avro(io.BytesIO(data)))


def test_instants_are_utc_timestamp_micros_and_wall_clock_times_local_ones_at_any_depth():
    utc = dt.timezone.utc
    table = pa.table(
        {
            "at": pa.array([dt.datetime(2021, 1, 1, 5, tzinfo=utc)], pa.timestamp("ns", tz="Europe/Paris")),
            "ntz": pa.array([dt.datetime(2021, 1, 1, 5)], pa.timestamp("us")),
            "nested": pa.array(
                [{"at": dt.datetime(9999, 12, 31, tzinfo=utc)}], pa.struct([("at", pa.timestamp("us", "UTC"))])
            ),
        }
    )
    for with_map in (False, True):
        if with_map:
            table = table.append_column(
                "m",
                pa.array(
                    [[("k", dt.datetime(2021, 1, 1, tzinfo=utc))]], pa.map_(pa.string(), pa.timestamp("us", "UTC"))
                ),
            )
        df = pl.from_arrow(table)
        df = df.select(pl.struct(df.columns).alias(frame.AFTER), pl.struct(pl.lit(1).alias("id")).alias(frame.KEY))
        schema, [record] = _read_by_the_avro_project(avro_bytes([avro_frame(df, Envelope("wrapped"))], "t", None))
        [after] = [f["type"][1] for f in schema["fields"] if f["name"] == "after"]
        types = {f["name"]: f["type"][1] for f in after["fields"]}
        assert types["at"]["logicalType"] == "timestamp-micros"
        assert types["ntz"]["logicalType"] == "local-timestamp-micros"
        assert types["nested"]["fields"][0]["type"][1]["logicalType"] == "timestamp-micros"
        assert record["after"]["at"] == dt.datetime(2021, 1, 1, 5, tzinfo=utc)
        assert record["after"]["nested"]["at"] == dt.datetime(9999, 12, 31, tzinfo=utc)
        if with_map:
            assert types["m"]["values"][1]["logicalType"] == "timestamp-micros"
            assert record["after"]["m"] == {"k": dt.datetime(2021, 1, 1, tzinfo=utc)}
