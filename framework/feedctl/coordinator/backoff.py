"""Trying again what a retry may fix (a sink, object storage, Spark), and how long a node waits first: the wait
doubles with each failure, up to a cap, and starts again from the first step once the job's high-water
mark has moved. A feed that makes progress between failures (a flapping sink) keeps retrying quickly; one
that makes none waits longer, never more than the cap. CockroachDB's `changefeed.max_retry_backoff` (30 s
since v26.1) with `reset_backoff_on_highwater_advance`, on by default here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from feedctl.coordinator.failure import Failure, classify
from feedctl.errors import ErrorKind
from feedctl.metrics import changefeed as metrics
from feedctl.project.options import Options
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import Starting
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
            wait = min(self.base * 2**self._streak, self.cap)
            self._streak += 1
            return wait


class Retrying:
    """`retrying(what, action)`: run `action`, retrying what a retry may fix (`classify`) after the waits of
    `backoff`, at most `retries` times; an outage of Spark starts a new session for the next attempt. What no
    retry fixes, a lost lease, a job no longer running and a requested stop go straight up. The coordinator
    and the node both try their steps through it, and tell what an error means by its `classify`."""

    def __init__(
        self,
        feed: str,
        node_id: str,
        retries: int,
        backoff: Backoff,
        spark: Starting,
        spark_place: SparkPlace,
        stop: threading.Event,
        options: Callable[[], Options],
        log,
    ):
        self.feed, self.node_id, self.retries, self.backoff = feed, node_id, retries, backoff
        self.spark, self.spark_place, self.stop, self.options, self.log = spark, spark_place, stop, options, log

    def classify(self, exc: BaseException) -> Failure:
        return classify(exc, self.spark_place)

    def __call__(self, what: str, action):
        attempt = 0
        while True:
            try:
                return action()
            except Exception as exc:
                failure = self.classify(exc)
                if not failure.retried:
                    raise
                if failure.kind == ErrorKind.OUTAGE:
                    self.spark.restart()
                attempt += 1
                if attempt > self.retries or self.stop.is_set():
                    raise
                metrics.retried(self.options(), self.node_id)
                wait = self.backoff.next_wait()
                self.log(
                    f"{self.feed}: {what} failed ({failure.cause}); retry {attempt} in {wait:g}s",
                    event="retry",
                    feed=self.feed,
                    attempt=attempt,
                    wait=wait,
                )
                if self.stop.wait(wait):
                    raise
