"""The rows each data file's deletion vector deletes, as the second reader reads them: its own reading of the
log's `add` actions (the newest checkpoint at or before a version, then the commits after it) and of the
vectors (Z85, the vector files' framing, the 64-bit portable Roaring format), written from the Delta
protocol apart from the reader's (`source/deletion_vector.py`, `source/delta_log.py`), so that a bug in
either shows as a difference. delta-rs's own `deletion_vectors()` refuses whole tables over features that
change nothing in how vectors are read (`vacuumProtocolCheck`, which Databricks gives new tables).
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from urllib.parse import unquote

import numpy as np
import pyarrow.parquet as pq

LOG = "_delta_log"
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_ARRAY_MAGIC = 1681511377  # a RoaringBitmapArray in Delta's portable format
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d{10}\.(\d{10})|\.[0-9a-fA-F-]{36})?\.(parquet|json)$")
_COMMIT = re.compile(r"^(\d{20})\.json$")


class Unreadable(Exception):
    """A deletion vector, or the log that names it, cannot be read."""


def deleted(fs, version: int, absolute) -> dict[str, set[int]]:
    """path (as the log names it, unquoted) -> the row indexes its deletion vector deletes, for the files of
    `version` that have one. `fs` holds the table's files, by paths relative to its root; `absolute(uri)`
    gives the file system and path of a file named by an absolute URI, percent-decoded."""
    return {path: rows(fs, vector, absolute) for path, vector in _vectors(fs, version).items()}


def rows(fs, vector: dict, absolute=None) -> set[int]:
    """The row indexes a deletion vector descriptor names."""
    kind, where = vector["storageType"], vector["pathOrInlineDv"]
    size = int(vector["sizeInBytes"])
    if kind == "i":
        return _bitmap_array(z85(where)[:size])
    if kind == "u":
        prefix, encoded = where[:-20], where[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85(encoded))}.bin"
        path = f"{prefix}/{name}" if prefix else name
    elif kind == "p" and absolute is not None:  # an absolute URI, inside the table's folder or not
        fs, path = absolute(where)
    else:
        raise Unreadable(f"a deletion vector of storage type {kind!r}")
    offset = int(vector.get("offset") or 1)
    try:
        with fs.open_input_file(path) as handle:
            handle.seek(offset)
            framed = handle.read(4 + size + 4)
    except (FileNotFoundError, OSError) as exc:
        raise Unreadable(f"deletion vector file {path}: {exc}") from None
    if len(framed) < 8 or struct.unpack(">i", framed[:4])[0] != size:
        raise Unreadable(f"deletion vector file {path}: no vector of {size} bytes at offset {offset}")
    return _bitmap_array(framed[4 : 4 + size])


def z85(text: str) -> bytes:
    """Z85 (ZeroMQ's base 85): each 5 characters are 4 bytes, big-endian."""
    if len(text) % 5:
        raise Unreadable(f"Z85 text of {len(text)} characters (not a multiple of 5)")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            if c not in _Z85_VALUE:
                raise Unreadable(f"{c!r} is not a Z85 character")
            value = value * 85 + _Z85_VALUE[c]
        if value > 0xFFFFFFFF:
            raise Unreadable(f"Z85 block {text[i : i + 5]!r} is more than 4 bytes")
        out += value.to_bytes(4, "big")
    return bytes(out)


def _bitmap_array(data: bytes) -> set[int]:
    """Delta's RoaringBitmapArray: a magic number, a count of 32-bit bitmaps, each with the high 32 bits of
    its values as its key."""
    if len(data) < 12 or struct.unpack_from("<i", data)[0] != _ARRAY_MAGIC:
        raise Unreadable("a deletion vector without the RoaringBitmapArray magic number")
    count = struct.unpack_from("<q", data, 4)[0]
    pos, out = 12, set()
    for _ in range(count):
        high = struct.unpack_from("<I", data, pos)[0]
        low, pos = _roaring32(data, pos + 4)
        out.update(int(v) | (high << 32) for v in low)
    return out


def _roaring32(data: bytes, pos: int) -> tuple[np.ndarray, int]:
    """A 32-bit Roaring bitmap in its portable serialization (the RoaringFormatSpec), and where it ends."""
    cookie = struct.unpack_from("<I", data, pos)[0]
    pos += 4
    if cookie & 0xFFFF == 12347:  # with run containers: which are runs, a bit each
        n = (cookie >> 16) + 1
        runs = np.unpackbits(np.frombuffer(data, np.uint8, (n + 7) // 8, pos), bitorder="little")[:n]
        pos += (n + 7) // 8
        offsets = n >= 4
    elif cookie == 12346:
        n = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        runs, offsets = np.zeros(n, np.uint8), True
    else:
        raise Unreadable(f"a Roaring bitmap with cookie {cookie}")
    header = np.frombuffer(data, "<u2", 2 * n, pos).reshape(n, 2)
    pos += 4 * n + (4 * n if offsets else 0)
    parts = []
    for (key, card_minus_one), run in zip(header.astype(np.int64), runs):
        if run:
            count = struct.unpack_from("<H", data, pos)[0]
            pairs = np.frombuffer(data, "<u2", 2 * count, pos + 2).reshape(count, 2).astype(np.int64)
            pos += 2 + 4 * count
            low = np.concatenate([np.arange(s, s + length + 1) for s, length in pairs]) if count else np.empty(0)
        elif card_minus_one < 4096:  # an array of up to 4096 values
            low = np.frombuffer(data, "<u2", card_minus_one + 1, pos).astype(np.int64)
            pos += 2 * (card_minus_one + 1)
        else:  # a bitmap of 2^16 bits
            bits = np.unpackbits(np.frombuffer(data, np.uint8, 8192, pos), bitorder="little")
            low = np.flatnonzero(bits)
            pos += 8192
        parts.append(low.astype(np.int64) | (key << 16))
    return (np.concatenate(parts) if parts else np.empty(0, np.int64)), pos


def _vectors(fs, version: int) -> dict[str, dict]:
    """path -> the deletion vector descriptor of its `add`, for the live files of `version` that have one."""
    import pyarrow.fs as pa_fs

    names = [i.base_name for i in fs.get_file_info(pa_fs.FileSelector(LOG)) if i.type == pa_fs.FileType.File]
    start, parts = _checkpoint(names, version)
    live: dict[tuple, dict] = {}

    def take(action: dict) -> None:
        if action.get("add"):
            add = action["add"]
            live[(add["path"], _vector_id(add))] = add
        elif action.get("remove"):
            remove = action["remove"]
            live.pop((remove["path"], _vector_id(remove)), None)

    for part in parts:
        for action in _checkpoint_actions(fs, part):
            take(action)
    for v in range(start + 1, version + 1):
        for action in _json_lines(fs, f"{LOG}/{v:020d}.json"):
            take(action)
    return {unquote(add["path"]): add["deletionVector"] for add in live.values() if add.get("deletionVector")}


def _vector_id(action: dict) -> str | None:
    vector = action.get("deletionVector")
    if not vector:
        return None
    return f"{vector['storageType']}{vector['pathOrInlineDv']}" + (
        f"@{vector['offset']}" if vector.get("offset") else ""
    )


def _checkpoint(names: list[str], version: int) -> tuple[int, list[str]]:
    """The newest complete checkpoint at or before `version`: (its version, its files), or (-1, [])."""
    found: dict[tuple[int, str], list[str]] = {}
    expected: dict[tuple[int, str], int] = {}
    for name in names:
        m = _CHECKPOINT.match(name)
        if m and int(m.group(1)) <= version:
            kind = "parts" if m.group(3) else name
            found.setdefault((int(m.group(1)), kind), []).append(name)
            expected[(int(m.group(1)), kind)] = int(m.group(3)) if m.group(3) else 1
    complete = [k for k, files in found.items() if len(files) == expected[k]]
    if not complete:
        return -1, []
    best = max(complete, key=lambda k: k[0])
    return best[0], sorted(found[best])


def _checkpoint_actions(fs, name: str):
    path = f"{LOG}/{name}"
    actions = _json_lines(fs, path) if name.endswith(".json") else _parquet_actions(fs, path)
    for action in actions:
        if action.get("sidecar"):
            yield from _parquet_actions(fs, f"{LOG}/_sidecars/{action['sidecar']['path']}")
        else:
            yield action


def _parquet_actions(fs, path: str):
    with fs.open_input_file(path) as handle:
        table = pq.read_table(handle)
    columns = [c for c in ("add", "remove", "sidecar") if c in table.column_names]
    for row in table.select(columns).to_pylist():
        yield {k: v for k, v in row.items() if v is not None}


def _json_lines(fs, path: str) -> list[dict]:
    try:
        with fs.open_input_stream(path) as stream:
            return [json.loads(line) for line in stream.read().decode("utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        raise Unreadable(f"{path} is no longer in the log") from None
