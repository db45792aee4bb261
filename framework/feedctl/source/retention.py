"""How long a Delta table keeps the history a feed reads, and how long a job has before it loses it.

A job reads version v's changes from files that `VACUUM` may delete once the table's
`delta.deletedFileRetentionDuration` has passed since they left the table (the change data files of v, and
the files v removed, leave it at v's commit), and from v's commit in the log, which a checkpoint may clean
up once `delta.logRetentionDuration` has passed since it. Both count from v's commit at the latest, so a
job's headroom on a table is the shorter retention, less the age of the oldest version it still needs: the
analogue of CockroachDB's protected timestamps, without the protection (Delta has none: it can only be said).

Delta writes the durations as Spark intervals (`interval 1 week`, `interval 30 days`, `7 days`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FILES = "delta.deletedFileRetentionDuration"
LOG = "delta.logRetentionDuration"
DEFAULTS = {FILES: 7 * 86_400.0, LOG: 30 * 86_400.0}  # Delta's: one week, thirty days

_UNITS = {
    "week": 7 * 86_400.0,
    "day": 86_400.0,
    "hour": 3_600.0,
    "minute": 60.0,
    "second": 1.0,
    "millisecond": 1e-3,
    "microsecond": 1e-6,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(week|day|hour|minute|second|millisecond|microsecond)s?\b")


class RetentionError(ValueError):
    """A table property that does not read as an interval Delta would take."""


def interval_seconds(text: str) -> float:
    """Seconds in a Delta retention property (`interval 1 week`; `interval` may be left out)."""
    body = text.strip().lower().removeprefix("interval").strip()
    pos, total = 0, 0.0
    for match in _PART.finditer(body):
        if body[pos : match.start()].strip():
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not body or body[pos:].strip():
        raise RetentionError(f"{text!r} is not an interval (such as `interval 7 days`)")
    return total


@dataclass(frozen=True)
class Retention:
    """A table's retention of removed files and of its log, in seconds, as its properties set them."""

    files: float
    log: float

    @classmethod
    def of(cls, configuration: dict) -> Retention:
        def read(name: str) -> float:
            text = configuration.get(name)
            if text is None:
                return DEFAULTS[name]
            try:
                return interval_seconds(text)
            except RetentionError as exc:
                raise RetentionError(f"{name}: {exc}") from None

        return cls(read(FILES), read(LOG))

    @property
    def shortest(self) -> float:
        return min(self.files, self.log)

    def headroom(self, needed_commit_ns: int | None, now_ns: int) -> float:
        """Seconds until the history of the oldest version a job needs (committed at `needed_commit_ns`; None:
        no version it needs is committed yet) may be gone; negative when it may be gone already."""
        if needed_commit_ns is None:
            return self.shortest
        return self.shortest - (now_ns - needed_commit_ns) / 1e9

    def keeping(self, needed_commit_ns: int, now_ns: int, margin: float = 86_400.0) -> str:
        """The `VACUUM` retention that keeps a version committed at `needed_commit_ns`, with a day's margin, in
        whole hours (what `RETAIN n HOURS` takes)."""
        hours = int(-(-((now_ns - needed_commit_ns) / 1e9 + margin) // 3600))
        return f"RETAIN {max(hours, 0)} HOURS"
