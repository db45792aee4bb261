"""A batch's progress while Spark emits it: what its tasks tell (`tasks/task_progress.py`) summed, of the
rows it is expected to emit (a scan's by the Delta log's row counts, changes by the rows staged), said as
`progress` events a few times a second for the batches worth watching: scans, backfills and large batches.
The reporter draws them as bars on a terminal, writes some as JSON events, and drops them otherwise. Nothing
here may fail a batch: without a listener there is no progress, and a failed event is dropped."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

from feedctl.project.model import Project
from feedctl.spark.place import SparkPlace

LARGE = 100_000  # rows: a batch of changes this large is worth a bar
TICK = 0.25  # seconds between two progress events of a batch
_listener = None
_lock = threading.Lock()


def batches_text(first: int, last: int) -> str:
    return f"batch {first}" if first == last else f"batches {first}–{last}"


class _Listener:
    """One UDP socket per process, on the address the executors reach the driver at."""

    def __init__(self, host: str):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind((host, 0))
        self.address = f"{host}:{self.socket.getsockname()[1]}"
        self.watched: dict[int, tuple[int, int]] = {}  # job -> the batches being emitted on this node
        self.tasks: dict[tuple, tuple[int, int]] = {}  # (job, batch, table, task) -> (messages, bytes)
        threading.Thread(target=self._receive, name="task-progress", daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                job, batch, table, task, messages, size = json.loads(self.socket.recv(4096))
                first, last = self.watched.get(job, (0, -1))
                if first <= batch <= last:  # not a late word of a batch done with
                    self.tasks[job, batch, table, task] = (messages, size)
            except (OSError, ValueError, TypeError):
                continue

    def watch(self, job: int, first: int, last: int) -> None:
        self.forget(job)
        self.watched[job] = (first, last)

    def done(self, job: int) -> tuple[int, int]:
        told = [v for k, v in list(self.tasks.items()) if k[0] == job]
        return sum(m for m, _ in told), sum(b for _, b in told)

    def forget(self, job: int) -> None:
        self.watched.pop(job, None)
        for key in [k for k in list(self.tasks) if k[0] == job]:
            self.tasks.pop(key, None)


def listener(spark: SparkPlace) -> _Listener | None:
    """The driver's address as Spark gives it to executors: `spark.driver.host`, else SPARK_LOCAL_IP, else
    this host's (127.0.0.1 for executors on this host). None when it cannot be bound: no bars, nothing else
    lost. (A remote server's executors may not reach this host at all: their words are then lost, and the
    bars stand still.)"""
    global _listener
    with _lock:
        if _listener is None:
            host = (
                spark.conf.get("spark.driver.host")
                or os.environ.get("SPARK_LOCAL_IP")
                or ("127.0.0.1" if spark.shares_disk else socket.gethostbyname(socket.gethostname()))
            )
            try:
                _listener = _Listener(host)
            except OSError:
                return None
        return _listener


class BatchProgress:
    """Watches one emit of a node's share of batches `first`–`last`, while the block runs."""

    def __init__(
        self, log, feed: str, job_id: int, first: int, last: int, kind: str, project: Project, queried: bool = False
    ):
        self.log, self.feed, self.job_id, self.first, self.last, self.kind = log, feed, job_id, first, last, kind
        # A CDC query's tasks emit only once Spark has run the query over all their rows: what they tell would
        # hold a bar at 0 until the end, so a queried feed's batch shows none.
        self.queried = queried
        self.listener = listener(project.spark)
        self.expected, self.said = 0, False
        self.started = self.last_time = time.monotonic()
        self.last_count, self.rate = 0, 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name=f"progress-{feed}", daemon=True)

    @property
    def address(self) -> str | None:
        return self.listener.address if self.listener else None

    def attempt(self) -> None:
        """An attempt at the batches starts (again, after a retry): nothing told or expected yet."""
        self.expected = 0
        if self.listener:
            self.listener.watch(self.job_id, self.first, self.last)

    def expect(self, rows: int) -> None:
        self.expected += rows
        self._watch_if_worth_it()

    def _watch_if_worth_it(self) -> None:
        """The watching thread starts once the batch is worth a bar: a node emitting the small batches of many
        feeds starts none."""
        worth = self.kind in ("scan", "backfill") or self.expected >= LARGE
        if self.listener and worth and not self.queried and self.thread.ident is None and not self.stop.is_set():
            self.thread.start()

    def __enter__(self) -> BatchProgress:
        self._watch_if_worth_it()
        return self

    def __exit__(self, kind, error, trace) -> None:
        if not self.listener:
            return
        self.stop.set()
        if self.thread.ident is not None:
            self.thread.join()
        if self.said:  # its bar ends: full when emitted, where it stood when not
            self._say(done=True, failed=error is not None)
        self.listener.forget(self.job_id)

    def _watch(self) -> None:
        while not self.stop.wait(TICK):
            if self.expected:
                self._say()

    def _say(self, done: bool = False, failed: bool = False) -> None:
        try:
            messages, size = self.listener.done(self.job_id)
            total = messages if done and not failed else max(self.expected, messages)
            now = time.monotonic()
            if messages > self.last_count:  # rows a second lately (the JVM's start and first reads count not)
                recent = (messages - self.last_count) / (now - self.last_time)
                self.rate = recent if not self.rate else (self.rate + recent) / 2
                self.last_count, self.last_time = messages, now
            elif self.last_count == 0:
                self.last_time = now
            self.said = True
            self.log(
                f"{self.feed}: {batches_text(self.first, self.last)} ({self.kind}): {messages} of ~{total} "
                f"rows emitted",
                event="progress",
                feed=self.feed,
                job_id=self.job_id,
                batch=self.last,
                kind=self.kind,
                rows=messages,
                rows_total=total,
                bytes=size,
                rate=round(self.rate),
                bytes_total=round(size * total / messages) if messages else None,
                seconds=round(now - self.started, 1),
                done=done,
                eta_seconds=round((total - messages) / self.rate) if self.rate and not done else None,
            )
        except Exception:  # how a batch is shown must never fail it
            pass
