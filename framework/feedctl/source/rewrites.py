"""The rows a version only carried over: read from the log, a version that rewrote files (an `UPDATE`,
`DELETE` or `MERGE` without change data, an overwrite) removes each file it touched whole and adds it again
without the rows it deleted and with the rows it changed. The rows it did not change come out as a delete
and an insert of an identical row of one key: no change. The tasks would pair and drop them (`tasks/pairing`);
dropped here, before staging, they are neither written nor read again, which is most of what such a version
costs.

Only a key held by one row on each side is matched: Delta enforces no key, and a key held twice is left for
the tasks to pair as they pair any other. A version whose rows would take more than `HELD_BYTES` of memory
streams on as it is, uncancelled: the tasks still drop what it did not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa

HELD_BYTES = 512 * 1024 * 1024  # a version's rows held in memory to be matched, at most

Piece = tuple[str | None, pa.RecordBatch]  # (change type, rows), as `table_reader` reads a commit


def without_unchanged(pieces: Iterable[Piece], key: list[str], held_bytes: int = HELD_BYTES) -> Iterator[Piece]:
    """The pieces of one version's changes, less each delete and insert of an identical row (of a key held
    once on each side)."""
    held: list[Piece] = []
    size = 0
    pieces = iter(pieces)
    for kind, batch in pieces:
        held.append((kind, batch))
        size += batch.nbytes
        if size > held_bytes:
            yield from held
            yield from pieces
            return
    deletes = [b for k, b in held if k == "delete" and b.num_rows]
    inserts = [b for k, b in held if k == "insert" and b.num_rows]
    if not deletes or not inserts or not set(key) <= set(deletes[0].schema.names):
        yield from held
        return
    before, after = pa.Table.from_batches(deletes), pa.Table.from_batches(inserts)
    kept_before, kept_after = _changed(before, after, key)
    for kind, rows in (("delete", before.filter(kept_before)), ("insert", after.filter(kept_after))):
        for batch in rows.to_batches():
            if batch.num_rows:
                yield kind, batch


def _changed(before: pa.Table, after: pa.Table, key: list[str]) -> tuple[pa.Array, pa.Array]:
    """Masks of the rows of `before` and `after` that are not one row carried over as it was."""
    names = before.schema.names
    others = [c for c in names if c not in key]
    b = pl.from_arrow(before).with_row_index("__b")
    a = pl.from_arrow(after).with_row_index("__a")
    pairs = b.join(a, on=key, how="inner", nulls_equal=True, suffix="__after")
    # a row of a key held twice on one side pairs twice: such pairs are left to the tasks
    same = ~pl.col("__b").is_duplicated() & ~pl.col("__a").is_duplicated()
    if others:
        same &= pl.struct(others).eq_missing(pl.struct([pl.col(f"{c}__after").alias(c) for c in others]))
    pairs = pairs.filter(same)
    return _all_but(before.num_rows, pairs["__b"].to_numpy()), _all_but(after.num_rows, pairs["__a"].to_numpy())


def _all_but(rows: int, dropped: np.ndarray) -> pa.Array:
    mask = np.ones(rows, dtype=bool)
    mask[dropped] = False
    return pa.array(mask)
