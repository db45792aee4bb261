"""CSV files (`initial_scan: only`): the row's columns, no header, as CockroachDB's EXPORT writes; a nested
value (CSV has none) as its JSON text, binary as base64. Compressed whole with `compression`."""

from __future__ import annotations

import polars as pl

from feedctl import frame
from feedctl.encoding.buffers import row_sizes
from feedctl.encoding.compression import compress
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.json import value_json


def csv_frame(df: pl.DataFrame) -> pl.DataFrame:
    """The row's columns; a nested value (CSV has none) as its JSON text."""
    out = []
    for f in df.schema[frame.AFTER].fields:
        value = pl.col(frame.AFTER).struct.field(f.name)
        if isinstance(f.dtype, (pl.Struct, pl.List, pl.Array, pl.Map)):
            value = value_json(value, f.dtype)
        elif f.dtype == pl.Binary:  # as in JSON messages
            value = value.bin.encode("base64")
        out.append(value.alias(f.name))
    return df.select(out)


def csv_bytes(frames: list[pl.DataFrame]) -> bytes:
    return pl.concat(frames).write_csv(include_header=False).encode("utf-8")


class CsvEncoder:
    def __init__(self, envelope: Envelope, topic: str, compression: str | None = None):
        self.compression = compression

    def encode(self, df: pl.DataFrame) -> tuple[pl.DataFrame, object]:
        rows = csv_frame(df)
        return rows, row_sizes(rows).to_numpy()

    def file(self, parts: list) -> bytes:
        return compress(csv_bytes(parts), self.compression)
