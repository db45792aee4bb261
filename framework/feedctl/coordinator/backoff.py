"""How long a node waits before trying again what a retry may fix (a sink, object storage, Spark): the wait
doubles with each failure, up to a cap, and starts again from the first step once the job's high-water
mark has moved. A feed that makes progress between failures (a flapping sink) keeps retrying quickly; one
that makes none waits longer, never more than the cap. CockroachDB's `changefeed.max_retry_backoff` (30 s
since v26.1) with `reset_backoff_on_highwater_advance`, on by default here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from feedctl.units import Hlc


class Backoff:
    def __init__(self, base: float, cap: float, high_water: Callable[[], Hlc]):
        self.base, self.cap = base, cap
        self._high_water = high_water  # the job's high-water mark, as the state store has it now
        self._seen: Hlc | None = None  # ... at the first failure of the current streak
        self._streak = 0
        self._lock = threading.Lock()  # the coordinator's thread and the node's emission share it

    def next_wait(self) -> float:
        """Seconds to wait after one more failure."""
        with self._lock:
            try:
                now = self._high_water()
            except Exception:  # the state store is what fails: the streak goes on
                now = self._seen
            if now != self._seen:
                self._seen, self._streak = now, 0
            wait = min(self.base * 2 ** self._streak, self.cap)
            self._streak += 1
            return wait
