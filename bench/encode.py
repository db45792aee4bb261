"""Time the encoding of change rows into each format's files, for rows with and without a map column.

The rows are what a batch hands an encoder (the envelope's `after`, `key`, `updated`): an id, a name, a
double, a timestamp and, for the second set, a map of two entries. Each line is the best of `--runs`.

    .venv/bin/python bench/encode.py [--rows 200000] [--runs 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl
import pyarrow as pa

from feedctl import frame
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.formats import ENCODERS


def rows(n: int, with_map: bool) -> pl.DataFrame:
    columns = {
        "id": np.arange(n),
        "name": [f"n{i}" for i in range(n)],
        "v": np.random.default_rng(1).random(n),
        "at": pa.array(np.arange(n) * 1_000_000, pa.timestamp("us", tz="UTC")),
    }
    if with_map:
        columns["tags"] = pa.array([[("a", i), ("b", i + 1)] for i in range(n)], pa.map_(pa.string(), pa.int64()))
    after = pl.from_arrow(pa.table(columns))
    return after.select(
        pl.struct(after.columns).alias(frame.AFTER),
        pl.struct("id").alias(frame.KEY),
        pl.lit(1_700_000_000_000_000_000, pl.Int64).alias(frame.TS_WALL),
        pl.lit(0, pl.Int32).alias(frame.TS_LOGICAL),
        pl.lit(1_700_000_000_000_000_000, pl.Int64).alias(frame.MVCC_WALL),
        pl.lit("insert").alias(frame.OP),
    )


def encode_once(fmt: str, df: pl.DataFrame) -> float:
    encoder = ENCODERS[fmt](Envelope("wrapped", updated=True), "s.t")
    started = time.perf_counter()
    encoded, _ = encoder.encode(df)
    encoder.file([encoded.slice(0, df.height)])  # one file of every message, as a sink cuts it
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.rows:,} rows per file, best of {args.runs}")
    for with_map in (False, True):
        df = rows(args.rows, with_map)
        for fmt in ("json", "parquet", "avro", "csv"):
            best = min(encode_once(fmt, df) for _ in range(args.runs))
            print(
                f"  {fmt:8} {'with a map column' if with_map else 'no map column':18} "
                f"{args.rows / best / 1000:8.0f} k rows/s"
            )


if __name__ == "__main__":
    main()
