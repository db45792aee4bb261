"""Deletion vectors: the rows of a data file that a version of a Delta table no longer holds.

Read per the protocol (delta-io/delta `PROTOCOL.md`, "Deletion Vectors" and "Deletion Vector Format"): a
descriptor names an inline bitmap or a file holding several, and the bitmap is a 64-bit RoaringBitmap in the
portable format behind a magic number. The bitmap itself is decoded by `pyroaring` (CRoaring); what is
Delta's own (the descriptor, the file's framing, Z85) is here.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass

import numpy as np

MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


class DeletionVectorError(Exception):
    """A deletion vector that cannot be read as the protocol describes it."""


@dataclass(frozen=True)
class Descriptor:
    """A `deletionVector` of an `add` or `remove` action."""

    storage_type: str  # u: relative path with a random prefix; p: absolute path; i: inline
    path_or_inline: str
    offset: int | None
    size: int
    cardinality: int

    @classmethod
    def of(cls, action: dict | None) -> Descriptor | None:
        if not action:
            return None
        return cls(
            action["storageType"],
            action["pathOrInlineDv"],
            action.get("offset"),
            int(action["sizeInBytes"]),
            int(action["cardinality"]),
        )

    @property
    def unique_id(self) -> str:
        """With the path, what tells two logical files apart (the protocol's key for reconciling actions)."""
        return self.storage_type + self.path_or_inline + (f"@{self.offset}" if self.offset is not None else "")

    def file(self, table_root: str) -> str:
        """Where the bitmap is stored, for the `u` and `p` storage types."""
        if self.storage_type == "p":
            return self.path_or_inline
        if self.storage_type != "u":
            raise DeletionVectorError(f"storage type {self.storage_type!r} has no file")
        prefix, encoded = self.path_or_inline[:-20], self.path_or_inline[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return f"{table_root.rstrip('/')}/{prefix + '/' if prefix else ''}{name}"


def z85_decode(text: str) -> bytes:
    """ZeroMQ's Z85 (RFC 32): every 5 characters are 4 bytes, big-endian."""
    if len(text) % 5:
        raise DeletionVectorError(f"Z85 text of {len(text)} characters (a multiple of 5 expected)")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            if c not in _Z85_VALUE:
                raise DeletionVectorError(f"{c!r} is not a Z85 character")
            value = value * 85 + _Z85_VALUE[c]
        if value >= 1 << 32:  # five characters reach 85^5 > 2^32: no encoder writes one that does
            raise DeletionVectorError(f"Z85 block {text[i : i + 5]!r} decodes past 2^32")
        out += value.to_bytes(4, "big")
    return bytes(out)


def deleted_rows(descriptor: Descriptor, table_root: str, read_range) -> np.ndarray:
    """The deleted row indexes of the data file, sorted. `read_range(path, offset, length)` reads bytes of
    the file at `path` (for the `u` and `p` storage types)."""
    if descriptor.storage_type == "i":
        data = z85_decode(descriptor.path_or_inline)[: descriptor.size]
    else:
        offset = descriptor.offset or 0
        framed = read_range(descriptor.file(table_root), offset, 4 + descriptor.size + 4)
        size = struct.unpack(">i", framed[:4])[0]
        if size != descriptor.size or len(framed) < 8 + size:
            raise DeletionVectorError(
                f"deletion vector of {descriptor.size} bytes expected at offset {offset}, "
                f"found {size} ({len(framed)} bytes read)"
            )
        data = framed[4 : 4 + size]
        checksum = struct.unpack(">I", framed[4 + size : 8 + size])[0]
        if zlib.crc32(data) != checksum:
            raise DeletionVectorError(f"deletion vector at offset {offset}: its checksum does not match")
    rows = _bitmap(data)
    if len(rows) != descriptor.cardinality:
        raise DeletionVectorError(f"deletion vector of {descriptor.cardinality} rows holds {len(rows)}")
    return rows


def _bitmap(data: bytes) -> np.ndarray:
    from pyroaring import BitMap64

    if len(data) < 4 or struct.unpack("<I", data[:4])[0] != MAGIC:
        raise DeletionVectorError("not a deletion vector (its magic number is wrong)")
    try:
        bitmap = BitMap64.deserialize(data[4:])
    except Exception as exc:  # CRoaring says only that the bytes are invalid
        raise DeletionVectorError(f"deletion vector bitmap cannot be decoded: {exc}") from None
    return np.fromiter(bitmap, dtype=np.int64, count=len(bitmap))


def kept(num_rows: int, deleted: np.ndarray, offset: int = 0) -> np.ndarray | None:
    """A boolean mask of the rows `offset`..`offset + num_rows` of a file that are not deleted, or None when
    none of them is."""
    inside = deleted[(deleted >= offset) & (deleted < offset + num_rows)] - offset
    if not len(inside):
        return None
    mask = np.ones(num_rows, dtype=bool)
    mask[inside] = False
    return mask
