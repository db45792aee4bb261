"""The header of an Avro object container file (the Avro specification, "Object Container Files"): the magic
bytes, a map of metadata (`avro.schema`, `avro.codec`) and the sync marker, followed by the data blocks.

Read to learn the schema a writer gave a file, and rewritten to read a file's blocks under another schema
that encodes them the same way (see `avro.read_avro`).
"""

from __future__ import annotations

import json

MAGIC = b"Obj\x01"


class ContainerError(ValueError):
    """The bytes are not an Avro object container file."""


def _long(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at `pos`, and the position after it."""
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ContainerError("the Avro header ends inside a number")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def _encoded_long(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def header(data: bytes) -> tuple[dict[str, bytes], int]:
    """The file's metadata, and where the sync marker after it starts."""
    if data[:4] != MAGIC:
        raise ContainerError("not an Avro object container file (no `Obj\\x01` at its start)")
    pos, meta = 4, {}
    while True:
        count, pos = _long(data, pos)
        if count == 0:
            return meta, pos
        if count < 0:  # a block that gives its size in bytes after its count
            count = -count
            _, pos = _long(data, pos)
        for _ in range(count):
            size, pos = _long(data, pos)
            key = data[pos : pos + size].decode("utf-8")
            pos += size
            size, pos = _long(data, pos)
            meta[key] = data[pos : pos + size]
            pos += size


def schema(data: bytes) -> dict:
    """The writer's schema of a file."""
    return json.loads(header(data)[0]["avro.schema"])


def with_schema(data: bytes, new: dict) -> bytes:
    """The same file, its header naming `new` as the writer's schema: its blocks are read under `new`, which
    must encode every value with the same bytes."""
    meta, end = header(data)
    meta["avro.schema"] = json.dumps(new).encode("utf-8")
    out = bytearray(MAGIC)
    out += _encoded_long(len(meta))
    for key, value in meta.items():
        out += _encoded_long(len(key.encode("utf-8"))) + key.encode("utf-8")
        out += _encoded_long(len(value)) + value
    out += _encoded_long(0)
    return bytes(out) + data[end:]
