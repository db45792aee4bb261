"""Which span a key belongs to: a hash of the key's JSON text (the message key, `[1, "a"]`), mod the table's
spans.

A batch run again after a crash must put every key in the span it had, so that it writes the same files:
the hash depends on the key's text alone, and is written out here rather than borrowed from a library whose
hash may change between its versions. It is computed columnar, over the bytes of all keys at once.
"""

from __future__ import annotations

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
    data = np.frombuffer(buffer, dtype=np.uint8)[offsets[0]:offsets[-1]].astype(np.uint64)
    lengths = np.diff(offsets)
    starts = offsets[:-1] - offsets[0]
    position = np.arange(len(data)) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max()), _PRIME, dtype=np.uint64))
    return _mix(np.add.reduceat((data + np.uint64(1)) * powers[position], starts))


def of_batch(batch: pa.RecordBatch, key: list[str], spans: int) -> np.ndarray:
    """The span of each row's key (int32)."""
    keys = pl.from_arrow(batch.select(key)).select(pl.struct(key).alias(frame.KEY))
    return (hash_text(keys.select(key_json(keys)).to_series()) % np.uint64(spans)).astype(np.int32)
