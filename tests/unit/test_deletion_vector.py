"""Deletion vectors read per the protocol: inline (Z85) and on disk (framed, with a checksum), the path of a
`u` descriptor decoded from its Z85 UUID; a damaged vector is an error, never rows kept or lost."""

from __future__ import annotations

import struct
import uuid
import zlib

import numpy as np
import pytest

from feedctl.source.deletion_vector import DeletionVectorError, Descriptor, deleted_rows, kept
from support.deletion_vectors import bitmap, z85


def test_an_inline_vector():
    data = bitmap(1, 3, 70_000)
    d = Descriptor("i", z85(data), None, len(data), 3)
    assert deleted_rows(d, "/t", None).tolist() == [1, 3, 70_000]


def test_a_vector_on_disk_at_its_offset(tmp_path):
    data = bitmap(0, 5)
    framed = b"\x01" + b"pad" + struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    name = uuid.uuid4()
    folder = tmp_path / "ab"
    folder.mkdir()
    (folder / f"deletion_vector_{name}.bin").write_bytes(framed)
    d = Descriptor("u", "ab" + z85(name.bytes), 4, len(data), 2)
    assert d.file(str(tmp_path)) == f"{tmp_path}/ab/deletion_vector_{name}.bin"

    def read_range(path, offset, length):
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    assert deleted_rows(d, str(tmp_path), read_range).tolist() == [0, 5]
    damaged = framed[:-1] + bytes([framed[-1] ^ 1])
    (folder / f"deletion_vector_{name}.bin").write_bytes(damaged)
    with pytest.raises(DeletionVectorError, match="checksum"):
        deleted_rows(d, str(tmp_path), read_range)


def test_a_vector_that_does_not_hold_its_cardinality_is_refused():
    data = bitmap(1, 2)
    with pytest.raises(DeletionVectorError, match="of 3 rows holds 2"):
        deleted_rows(Descriptor("i", z85(data), None, len(data), 3), "/t", None)
    with pytest.raises(DeletionVectorError, match="magic"):
        deleted_rows(Descriptor("i", z85(b"\0" * 8), None, 8, 0), "/t", None)


def test_kept_rows_of_a_slice_of_the_file():
    deleted = np.array([1, 4, 9])
    assert kept(5, deleted).tolist() == [True, False, True, True, False]
    assert kept(5, deleted, offset=5).tolist() == [True, True, True, True, False]
    assert kept(3, deleted, offset=10) is None
