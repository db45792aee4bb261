"""Durations, sizes and timestamps as users write them in options."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$")
_SIZE_BYTES = {
    None: 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration (`1m30s`); ValueError when malformed."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"not a duration: {text!r}")
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise ValueError(f"not a duration: {text!r}")
    return total


def parse_size(value) -> int:
    """Bytes in `16MiB`, `64MB`, `1048576` or an integer; ValueError when malformed."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"not a size: {value!r}")
        return value
    match = _SIZE.match(str(value).strip())
    if not match:
        raise ValueError(f"not a size: {value!r}")
    size = int(Fraction(match.group(1)) * _SIZE_BYTES[match.group(2)])  # exact, even past 2**53
    if size < 1:
        raise ValueError(f"not a size: {value!r}")
    return size


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """`1 message`, `2 messages`, `0 batches`: a count with its noun."""
    return f"{n} {noun if n == 1 else nouns or noun + ('es' if noun.endswith(('s', 'ch', 'sh', 'x')) else 's')}"


def size_text(n: int) -> str:
    """`n` bytes for people: `512 B`, `2.5 KiB`, `13.0 MiB`."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"


@dataclass(frozen=True, order=True)
class Hlc:
    """An event timestamp as CockroachDB prints it: wall-clock nanoseconds and a logical counter."""

    wall: int
    logical: int = 0

    def __str__(self) -> str:
        return f"{self.wall}.{self.logical:010d}"

    def utc(self) -> str:
        """The wall time for people: `2026-11-25 02:40:01.123 UTC` (milliseconds; `-` for no time)."""
        if not self.wall:
            return "-"
        moment = datetime.fromtimestamp(self.wall // 1_000_000_000, timezone.utc)
        return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{self.wall // 1_000_000 % 1000:03d} UTC"

    def for_people(self) -> str:
        """As CockroachDB prints it, and when: `1764038401123000000.0000000000 (2026-11-25 02:40:01.123 UTC)`."""
        return f"{self} ({self.utc()})" if self.wall else "none"


@dataclass(frozen=True)
class StartPoint:
    """Where a `cursor` or `end_time` points: an event timestamp, or a Delta version."""

    hlc: Hlc | None = None
    version: int | None = None


_HLC = re.compile(r"^([0-9]{1,19})(?:\.([0-9]{1,10}))?$")
_VERSION = re.compile(r"^version:([0-9]+)$")
_FRACTION = re.compile(r"(?<=[0-9]{2}:[0-9]{2}:[0-9]{2})[.,]([0-9]+)")


def parse_timestamp(text: str, allow_version: bool = True) -> StartPoint:
    """A `cursor`/`end_time` value: `<ns>.<logical>`, `<ns>`, RFC 3339, or `version:<n>`."""
    text = str(text).strip()
    if match := _HLC.match(text):  # a decimal: `.1` is logical 1000000000, as CockroachDB reads it
        return StartPoint(hlc=Hlc(int(match.group(1)), int((match.group(2) or "0").ljust(10, "0"))))
    if allow_version and (match := _VERSION.match(text)):
        return StartPoint(version=int(match.group(1)))
    fraction_ns = 0  # datetime keeps microseconds; RFC 3339 seconds may have nanoseconds
    if fraction := _FRACTION.search(text):
        fraction_ns = int(fraction.group(1)[:9].ljust(9, "0"))
        text = text[: fraction.start()] + text[fraction.end() :]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a timestamp: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    nanos = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000 + fraction_ns
    return StartPoint(hlc=Hlc(nanos))
