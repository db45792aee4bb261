"""Which span a key belongs to: a hash of the key's JSON text (the message key, `[1, "a"]`), mod the table's
spans. A regional-by-row table has that many spans per region: a region's block of spans starts at its slot
(the order in which the job found the regions) times the spans per region, so each region's rows are in spans
of their own, whose home is the region.

A batch run again after a crash must put every key in the span it had, so that it writes the same files:
the hash depends on the key's text alone, and is written out here rather than borrowed from a library whose
hash may change between its versions. It is computed columnar, over the bytes of all keys at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from feedctl import frame
from feedctl.encoding.buffers import utf8_buffers
from feedctl.encoding.json import key_json

_PRIME = np.uint64(0x100000001B3)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit reaches every output bit."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def hash_text(text: pl.Series) -> np.ndarray:
    """A 64-bit hash of each (non-empty) string: the sum of (byte + 1) · P^(position + 1), wrapping at 2^64."""
    offsets, buffer = utf8_buffers(text)
    data = np.frombuffer(buffer, dtype=np.uint8)[offsets[0] : offsets[-1]].astype(np.uint64)
    lengths = np.diff(offsets)
    starts = offsets[:-1] - offsets[0]
    position = np.arange(len(data)) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max()), _PRIME, dtype=np.uint64))
    return _mix(np.add.reduceat((data + np.uint64(1)) * powers[position], starts))


class UnknownRegion(Exception):
    """A row's region has no spans yet: the coordinator adds a region's spans before any batch holding it."""


@dataclass(frozen=True)
class Regions:
    """The regions of a regional-by-row table that have spans: region value (None for NULL) → slot. Plain
    values: it travels to the executors with a scan's tasks."""

    column: str
    slots: dict

    @staticmethod
    def home(value) -> str | None:
        """The locality a region's spans live in."""
        return None if value is None else f"region={value}"

    @staticmethod
    def of_spans(column: str, per_region: int, homes: list[tuple[int, str | None]]) -> "Regions":
        """From the table's spans: (span, home) pairs."""
        return Regions(
            column, {None if home is None else home.split("=", 1)[1]: span // per_region for span, home in homes}
        )

    def value(self, slot: int):
        return next(v for v, s in self.slots.items() if s == slot)

    def of(self, spans, per_region: int) -> set:
        """The regions of these spans."""
        return {self.value(s // per_region) for s in spans}

    def slot_of(self, values: pa.Array) -> np.ndarray:
        mapping = {v: s for v, s in self.slots.items() if v is not None}
        found = pl.Series(values=values).replace_strict(mapping, default=None, return_dtype=pl.Int32)
        if None in self.slots:
            found = found.fill_null(self.slots[None])
        if found.null_count():
            missing = pl.Series(values=values).filter(found.is_null()).unique().to_list()
            raise UnknownRegion(f"region {missing[0]!r} of column {self.column} has no spans")
        return found.to_numpy()


def of_batch(batch: pa.RecordBatch, key: list[str], spans: int, regions: Regions | None = None) -> np.ndarray:
    """The span of each row's key (int32)."""
    keys = pl.from_arrow(batch.select(key)).select(pl.struct(key).alias(frame.KEY))
    span = hash_text(keys.select(key_json(keys)).to_series()) % np.uint64(spans)
    if regions is not None:
        span = span + regions.slot_of(batch.column(regions.column)).astype(np.uint64) * np.uint64(spans)
    return span.astype(np.int32)
