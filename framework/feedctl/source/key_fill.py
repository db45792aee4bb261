"""A table's key changed at the version that added the new key's columns (`job/key_change.py`): there a row's
before image lacks them, and takes them from its after image (matched by the old key), so a row the change
only gave a region pairs with itself; a row deleted there is deleted with those columns null."""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from feedctl.frame import AFTER_TYPES, CHANGE_TYPE


def with_new_key_columns(
    reader: pa.RecordBatchReader, afters: pa.RecordBatchReader, old_key: list[str], added: tuple[str, ...]
) -> pa.RecordBatchReader:
    """The change rows of `reader`, of the version that added the new key's columns `added`, with each before
    image given those columns from the after image of its old key (`afters`: the version's changes of the
    old key and `added` alone; a key Delta holds twice takes the greatest values, as a re-run would). A
    row deleted there keeps them null."""
    images = pl.from_arrow(afters.read_all())
    mapping = (
        images.filter(pl.col(CHANGE_TYPE).is_in(AFTER_TYPES))
        .group_by(old_key)
        .agg([pl.col(c).max().alias(f"__new_{c}") for c in added])
    )
    before = ~pl.col(CHANGE_TYPE).is_in(AFTER_TYPES)

    def batches():
        for batch in reader:
            rows = (
                pl.from_arrow(batch)
                .join(mapping, on=old_key, how="left", nulls_equal=True)
                .with_columns([pl.when(before).then(pl.col(f"__new_{c}")).otherwise(pl.col(c)).alias(c) for c in added])
            )
            yield from rows.select(batch.schema.names).to_arrow().cast(batch.schema).to_batches()

    return pa.RecordBatchReader.from_batches(reader.schema, batches())
