"""The state store away, as one node meets it. Every loop of the node that steps on the store (a coordinator's
step, a span's emission, a feed's turn between its runs) waits and tries again for as long as it lasts, each
wait as long as the outage has lasted so far, from the first to the cap: the waits double, whichever loop
meets the store first. The node says so once, once a minute while it lasts and once when it is over, however
many of its feeds meet it, rather than a line per feed per poll.

A store busy rather than away (SQLite's lock, a pool's connections all taken) meets the same policy: the
first loop that works again ends the outage, and a line is said at most once a minute, with its end."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

# While an outage lasts, a line says so once a minute (CockroachDB's changefeeds log each retry; here a
# broker away for hours would otherwise write a line every capped wait).
SAY_AGAIN = 60.0


@dataclass
class _Away:
    cause: str
    since: float  # time.monotonic() at the first failure
    said: bool  # whether a line said this outage began: then a line says it is over


class StoreOutage:
    def __init__(self, log, first: float, cap: float, clock=time.monotonic):
        self.log, self.first, self.cap, self._clock = log, first, cap, clock
        self._away: _Away | None = None
        self._last_said = float("-inf")
        self._lock = threading.Lock()

    def failed(self, label: str, cause: str) -> float:
        """The store failed `label`'s step (a feed) with `cause`: seconds to wait before trying again."""
        now = self._clock()
        with self._lock:
            away = self._away
            due = now - self._last_said >= SAY_AGAIN
            if away is None:
                away = self._away = _Away(cause, now, said=False)
            if due:
                self._last_said, away.said = now, True
            lasted = now - away.since
        if due:
            self.log(
                f"{cause}; every feed of this node waits and tries again until it works"
                if lasted == 0
                else f"the state store still fails after {lasted:.0f}s, met by {label}: {cause}",
                event="store_away",
                feed=label,
                cause=cause,
                away_seconds=round(lasted, 1),
            )
        return min(self.cap, max(self.first, lasted))

    def worked(self) -> None:
        """A step on the store worked: an outage going on is over."""
        if self._away is None:  # the common case, read without the lock
            return
        now = self._clock()
        with self._lock:
            away, self._away = self._away, None
        if away is not None and away.said:
            self.log(
                f"the state store works again after {now - away.since:.0f}s",
                event="store_back",
                away_seconds=round(now - away.since, 1),
            )
