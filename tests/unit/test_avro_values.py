"""Avro files hold every value exactly: decimals whose unscaled value has its top bit set (which polars'
Avro writer would write without their sign byte, reading back negative) are written as their text."""

from __future__ import annotations

import io
from decimal import Decimal

import polars as pl

from feedctl import frame
from feedctl.encoding.avro import avro_bytes, avro_frame
from feedctl.encoding.envelope import Envelope


def test_decimals_read_back_as_written():
    values = [Decimal("22222.22222"), Decimal("-99999.99999"), Decimal("0.00001"), None]
    after = pl.DataFrame({"d": values}, schema={"d": pl.Decimal(10, 5)}).select(pl.struct("d").alias(frame.AFTER))
    df = after.with_columns(pl.struct(pl.lit(1).alias("id")).alias(frame.KEY))
    data = avro_bytes([avro_frame(df, Envelope("wrapped"))], "t", None)
    read = pl.read_avro(io.BytesIO(data))["after"].struct.field("d").to_list()
    assert read == ["22222.22222", "-99999.99999", "0.00001", None]
