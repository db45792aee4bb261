"""Compressing a whole file or request body: `gzip` and `zstd`, with deterministic bytes."""

from __future__ import annotations

import gzip


def compress(data: bytes, compression: str | None) -> bytes:
    """Deterministic bytes: gzip without a timestamp in its header, so a re-run writes the same file."""
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if compression == "zstd":
        import pyarrow as pa

        return pa.compress(data, codec="zstd", asbytes=True)
    return data


def decompress(name: str, data: bytes) -> bytes:
    """A data file's bytes as written before compression, known by the file's extension."""
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".zst"):
        import pyarrow as pa

        return pa.input_stream(pa.BufferReader(data), compression="zstd").read()
    return data
