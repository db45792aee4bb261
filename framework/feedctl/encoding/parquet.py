"""Parquet files, as CockroachDB lays them out: the row's columns, then `__crdb__event_type` (`c` insert, `u`
update of a key that had a row, `d` delete), `__crdb__updated` and `__crdb__mvcc_timestamp` (strings, when
asked) and `__crdb__before` (the previous row as JSON, with `diff`). A delete carries its key columns and
nulls. Key columns the row leaves out (a CDC query's projection) are added, so every row names its key; the
file's metadata lists the key and the row's own columns, so a reader can tell them apart. Compressed inside
the file (snappy unless `compression` says gzip or zstd).
"""

from __future__ import annotations

import io
import json

import polars as pl
import pyarrow.parquet as pq

from feedctl import frame
from feedctl.encoding.buffers import row_sizes
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.json import hlc_text, object_json

EVENT_TYPE = "__crdb__event_type"
UPDATED = "__crdb__updated"
MVCC_TIMESTAMP = "__crdb__mvcc_timestamp"
BEFORE = "__crdb__before"
RESOLVED = "__crdb__resolved"
# Parquet key-value metadata: JSON lists of the key's columns and the row's own columns.
META_KEY = b"feedctl.key"
META_ROW = b"feedctl.row"


def _row(df: pl.DataFrame) -> tuple[list[str], list[str], list[pl.Expr]]:
    """(row columns, key columns, expressions): the row's columns with a delete's key filled in, then any key
    column the row lacks."""
    after, key = df.schema[frame.AFTER], df.schema[frame.KEY]
    row = [f.name for f in after.fields]
    keys = [f.name for f in key.fields]
    exprs = [
        (
            pl.coalesce(pl.col(frame.AFTER).struct.field(c), pl.col(frame.KEY).struct.field(c))
            if c in keys
            else pl.col(frame.AFTER).struct.field(c)
        ).alias(c)
        for c in row
    ]
    exprs += [pl.col(frame.KEY).struct.field(c).alias(c) for c in keys if c not in row]
    return row, keys, exprs


def parquet_frame(df: pl.DataFrame, envelope: Envelope) -> pl.DataFrame:
    row, keys, exprs = _row(df)
    op = pl.col(frame.OP)
    exprs.append(
        pl.when(op == "delete")
        .then(pl.lit("d"))
        .when(op == "update")
        .then(pl.lit("u"))
        .otherwise(pl.lit("c"))
        .alias(EVENT_TYPE)
    )
    if envelope.updated:
        exprs.append(hlc_text(frame.TS_WALL, frame.TS_LOGICAL).alias(UPDATED))
    if envelope.mvcc_timestamp:
        exprs.append(hlc_text(frame.MVCC_WALL).alias(MVCC_TIMESTAMP))
    if envelope.diff:
        exprs.append(pl.when(pl.col(frame.BEFORE).is_not_null()).then(object_json(df, frame.BEFORE)).alias(BEFORE))
    return df.select(exprs)


def parquet_metadata(df: pl.DataFrame) -> dict[bytes, str]:
    """The key's columns and the row's own columns (the others are key columns added to the row)."""
    row, keys, _ = _row(df)
    return {META_KEY: json.dumps(keys), META_ROW: json.dumps(row)}


def parquet_bytes(frames: list[pl.DataFrame], compression: str | None, metadata: dict | None = None) -> bytes:
    table = pl.concat(frames).to_arrow()
    if metadata:
        table = table.replace_schema_metadata(metadata)
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression or "snappy")
    return out.getvalue()


def resolved_parquet(resolved: str) -> bytes:
    """A resolved timestamp as Parquet: one row, one DECIMAL column `__crdb__resolved`, as CockroachDB writes."""
    from decimal import Decimal

    return parquet_bytes([pl.DataFrame({RESOLVED: [Decimal(resolved)]}, schema={RESOLVED: pl.Decimal(38, 10)})], None)


class ParquetEncoder:
    def __init__(self, envelope: Envelope, topic: str, compression: str | None = None):
        self.envelope, self.compression = envelope, compression
        self.metadata: dict | None = None

    def encode(self, df: pl.DataFrame) -> tuple[pl.DataFrame, object]:
        self.metadata = parquet_metadata(df)
        rows = parquet_frame(df, self.envelope)
        return rows, row_sizes(rows).to_numpy()

    def file(self, parts: list) -> bytes:
        return parquet_bytes(parts, self.compression, self.metadata)
