"""Reading a project's files: regular files of bounded size, as UTF-8. A FIFO would block a compile for ever
and `/dev/zero` fill its memory; a file larger than any project file should be is refused before it is read."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 10 * 2**20  # a project file (YAML, query, macro) larger than this is refused


@dataclass
class Unreadable(Exception):
    """Why a file cannot be read, and where in it (line and column 1-based; 0: the file as a whole)."""

    reason: str
    line: int = 0
    column: int = 0
    expected: str = ""

    def __str__(self) -> str:
        return self.reason


def read_text(path: Path, limit: int = MAX_BYTES) -> str:
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise Unreadable("it is a folder", expected="a file")
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("it is not a regular file (a FIFO, a socket or a device)", expected="a file")
        if info.st_size > limit:
            raise Unreadable(f"it is {info.st_size:,} bytes, more than the {limit:,} a project file may have")
        raw = path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        raise Unreadable(
            f"it is not UTF-8 text ({exc.reason} at byte {exc.start})",
            raw.count(b"\n", 0, exc.start) + 1,
            exc.start - line_start + 1,
            "UTF-8 text",
        ) from None
