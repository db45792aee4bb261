"""Trying again what a retry may fix (a sink, object storage, Spark), and how long a node waits first: the wait
doubles with each failure, up to a cap, and starts again from the first step once the job's high-water
mark has moved. A feed that makes progress between failures (a flapping sink) keeps retrying quickly; one
that makes none waits longer, never more than the cap. CockroachDB's `changefeed.max_retry_backoff` (30 s
since v26.1) with `reset_backoff_on_highwater_advance`, on by default here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from feedctl.coordinator.failure import Failure, classify
from feedctl.coordinator.store_outage import SAY_AGAIN, StoreOutage
from feedctl.errors import ErrorKind, RetryLater
from feedctl.metrics import changefeed as metrics
from feedctl.options import Options
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import Starting
from feedctl.units import Hlc


class Backoff:
    def __init__(self, base: float, cap: float, high_water: Callable[[], Hlc]):
        self.base, self.cap = base, cap
        self._high_water = high_water  # the job's high-water mark, as the state store has it now
        self._seen: Hlc | None = None  # ... at the first failure of the current streak
        self._streak = 0
        self._lock = threading.Lock()  # the coordinator's turns and the node's emission share it

    def high_water(self) -> Hlc:
        return self._high_water()

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
    `backoff`. An outage (Spark, a sink, an object store away) is retried for as long as it lasts when
    `outages_last` (a `--follow` node), saying so once, once a minute, and once it is over, with the job's
    running status saying what it waits for; otherwise, as anything else a retry may fix, at most `retries`
    times. An outage of Spark starts a new session for the next attempt. What no retry fixes, a lost lease, a
    job no longer running and a requested stop go straight up. The coordinator and the node both try their
    steps through it, and tell what an error means by its `classify`."""

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
        outages_last: bool = False,
        status: Callable[[str], None] | None = None,
        store_outage: StoreOutage | None = None,
    ):
        self.feed, self.node_id, self.retries, self.backoff = feed, node_id, retries, backoff
        self.spark, self.spark_place, self.stop, self.options, self.log = spark, spark_place, stop, options, log
        self.outages_last, self.status = outages_last, status
        # the node's, shared by its feeds; a job alone (a test, a one-off run's) has one of its own
        self.store_outage = store_outage or StoreOutage(log, backoff.base, backoff.cap)
        self._away: Away | None = None  # the outage going on, if any
        self._lock = threading.Lock()  # the coordinator's turns and the node's emission share it

    def classify(self, exc: BaseException) -> Failure:
        return classify(exc, self.spark_place)

    def store_wait(self, exc: BaseException) -> float | None:
        """Seconds a loop of the node waits before its step again when `exc` is the state store failing
        (`StoreOutage`); None when it is something else."""
        failure = self.classify(exc)
        if failure.kind != ErrorKind.STORE_UNAVAILABLE:
            return None
        return self.store_outage.failed(self.feed, failure.cause)

    def __call__(self, what: str, action):
        attempt = 0
        while True:
            try:
                result = action()
            except Exception as exc:
                attempt += 1
                wait = self.failed(what, exc, attempt)
                if wait is None or self.stop.wait(wait):
                    raise
                continue
            self.worked(what)
            return result

    def later(self) -> RetryingLater:
        """These retries for steps the node's scheduler runs: a wait raises `RetryLater` rather than sleeping."""
        return RetryingLater(self)

    def failed(self, what: str, exc: Exception, attempt: int) -> float | None:
        """`what` failed with `exc` at its `attempt`: seconds to wait before the next, said as it should be;
        None when it is not tried again."""
        failure = self.classify(exc)
        if not failure.retried:
            return None
        if failure.spark:
            self.spark.restart()
        lasting = failure.kind == ErrorKind.OUTAGE and self.outages_last
        if (attempt > self.retries and not lasting) or self.stop.is_set():
            return None
        metrics.retried(self.options(), self.node_id)
        wait = self.backoff.next_wait()
        if lasting:
            self._away_for(what, failure, wait)
        else:
            self.log(
                f"{self.feed}: {what} failed ({failure.cause}); retry {attempt} in {wait:g}s",
                event="retry",
                feed=self.feed,
                attempt=attempt,
                wait=wait,
            )
        return wait

    def worked(self, what: str) -> None:
        if self._away is not None:
            self._back(what)

    def _away_for(self, what: str, failure: Failure, wait: float) -> None:
        now = time.time()
        with self._lock:
            away, self._away = self._away, self._away or Away(what, failure.cause, now, now)
            said = away is None or now - away.said >= SAY_AGAIN
            if away is not None and said:
                self._away = replace(away, said=now)
            since = self._away.since
        if said:
            first = away is None
            self.log(
                f"{self.feed}: {what} failed ({failure.cause}); "
                + ("retrying until it is back" if first else f"still failing after {now - since:.0f}s")
                + f", next try in {wait:g}s",
                event="outage" if first else "outage_ongoing",
                feed=self.feed,
                cause=failure.cause,
                away_seconds=round(now - since, 1),
                wait=wait,
            )
        self._say_status(f"waiting since {Hlc(int(since * 1e9)).utc()}: {failure.cause}")

    def _back(self, what: str) -> None:
        """`what` worked: the outage is over if `what` is the step that met it. Another step working meanwhile
        (a resolved file written while Spark is away) says nothing of the part the outage is of."""
        with self._lock:
            away = self._away
            if away is None or away.what != what:
                return
            self._away = None
        now = time.time()
        try:
            behind = f"; {max(0.0, now - self.backoff.high_water().wall / 1e9):.0f}s behind"
        except Exception:  # the store is what was away: said on its next step
            behind = ""
        self.log(
            f"{self.feed}: {away.what} works again after {now - away.since:.0f}s ({away.cause}){behind}",
            event="outage_over",
            feed=self.feed,
            cause=away.cause,
            away_seconds=round(now - away.since, 1),
        )
        self._say_status("")

    def _say_status(self, text: str) -> None:
        if self.status is None:
            return
        try:
            self.status(text)
        except Exception:  # the store itself away: the log says it
            pass


@dataclass(frozen=True)
class Away:
    """An outage going on: the step that met it and why it fails, since when, and when a line last said so."""

    what: str
    cause: str
    since: float
    said: float


class RetryingLater:
    """`Retrying` for a step the node's scheduler runs: what a retry may fix raises `RetryLater` with the
    wait, and the scheduler runs the step again after it, from its start, its worker running other jobs' steps
    meanwhile. Attempts are counted across steps, per what is tried, until it works."""

    def __init__(self, retrying: Retrying):
        self.retrying = retrying
        self._attempts: dict[str, int] = {}

    def __getattr__(self, name: str):
        return getattr(self.retrying, name)

    def __call__(self, what: str, action):
        try:
            result = action()
        except RetryLater:
            raise
        except Exception as exc:
            failure = self.retrying.classify(exc)
            if failure.retried and self.retrying.stop.is_set():  # the node drains: the job is left as it is
                raise RetryLater(0.0, failure.cause) from exc
            attempt = self._attempts[what] = self._attempts.get(what, 0) + 1
            wait = self.retrying.failed(what, exc, attempt)
            if wait is None:
                raise
            raise RetryLater(wait, failure.cause) from exc
        self._attempts.pop(what, None)
        self.retrying.worked(what)
        return result
