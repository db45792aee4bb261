"""Deletion vectors as a writer makes them, for the tests of both readers of them: a bitmap of deleted rows
serialized by CRoaring (pyroaring) behind Delta's magic number, and Z85 text, written here from the
specification (neither reader's decoder)."""

from __future__ import annotations

import struct

from pyroaring import BitMap64

MAGIC = 1681511377  # Delta's RoaringBitmapArray
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """Z85 text of `data`, padded with zero bytes to a multiple of 4."""
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out.append("".join(_Z85[value // 85**p % 85] for p in range(4, -1, -1)))
    return "".join(out)


def z85_decode(text: str) -> bytes:
    """The bytes of Z85 `text` (a multiple of 5 characters)."""
    out = b""
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            value = value * 85 + _Z85.index(c)
        out += value.to_bytes(4, "big")
    return out


def bitmap(*rows: int, runs: bool = False) -> bytes:
    """The serialized vector deleting `rows` (with `runs`, run containers where they are smaller)."""
    deleted = BitMap64(rows)
    if runs:
        deleted.run_optimize()
    return struct.pack("<I", MAGIC) + deleted.serialize()
