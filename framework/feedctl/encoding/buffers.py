"""Encoded messages as bytes: Arrow's layout of a string column, lines laid out once for files to take runs
of, and the size estimate by which files are cut."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa


def utf8_buffers(text: pl.Series) -> tuple[np.ndarray, pa.Buffer]:
    """A string column as Arrow lays it out: the values' offsets (one more than values) into one buffer of
    UTF-8 bytes. Nothing becomes a Python string."""
    array = text.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string: one contiguous buffer
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    return offsets, array.buffers()[2]


class Lines:
    """Encoded messages as one buffer of UTF-8 bytes, laid out once; a file takes a run of them as it is."""

    def __init__(self, text: pl.Series):
        self.offsets, self.data = utf8_buffers(text)

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def slice(self, start: int, length: int) -> pa.Buffer:
        """The bytes of messages start .. start + length - 1, one after the other."""
        first = int(self.offsets[start])
        return self.data.slice(first, int(self.offsets[start + length]) - first)


def _size(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if dtype in (pl.String, pl.Categorical):
        return expr.cast(pl.String).str.len_bytes().fill_null(0).cast(pl.Int64)
    if dtype == pl.Binary:
        return expr.bin.size().fill_null(0).cast(pl.Int64)
    if isinstance(dtype, pl.Struct):
        return pl.sum_horizontal([_size(expr.struct.field(f.name), f.dtype) for f in dtype.fields] or [pl.lit(0)])
    if isinstance(dtype, (pl.List, pl.Array)):
        return expr.cast(pl.List(dtype.inner)).list.len().fill_null(0).cast(pl.Int64) * 8
    if isinstance(dtype, pl.Map):
        return expr.map.len().fill_null(0).cast(pl.Int64) * 16
    return pl.lit(8, pl.Int64)


def row_sizes(rows: pl.DataFrame) -> pl.Series:
    """An estimate of each row's size in bytes that depends on the row alone (so files are cut the same
    whatever the batches): strings and binary by length, anything else 8 bytes."""
    per_row = pl.repeat(0, pl.len(), dtype=pl.Int64)  # one value per row, when every column's is a constant
    sizes = [per_row, *(_size(pl.col(c), t) for c, t in rows.schema.items())]
    return rows.select(pl.sum_horizontal(sizes).alias("size")).to_series()
