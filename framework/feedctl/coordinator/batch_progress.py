"""A batch's progress while Spark emits it: what its tasks tell (`aggregator/task_progress.py`) summed, of the
rows it is expected to emit (a scan's by the Delta log's row counts, changes by the rows staged), said as
`progress` events every second for the batches worth watching: scans, backfills and large batches. The
reporter draws them as bars on a terminal, writes some as JSON events, and drops them otherwise."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

LARGE = 100_000  # rows: a batch of changes this large is worth a bar
TICK = 0.25  # seconds between two progress events of a batch
_listener = None
_lock = threading.Lock()


class _Listener:
    """One UDP socket per process, on the address the executors reach the driver at."""

    def __init__(self, host: str):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind((host, 0))
        self.address = f"{host}:{self.socket.getsockname()[1]}"
        self.tasks: dict[tuple, tuple[int, int]] = {}  # (job, batch, table, task) -> (messages, bytes)
        threading.Thread(target=self._receive, name="task-progress", daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                job, batch, table, task, messages, size = json.loads(self.socket.recv(4096))
            except (OSError, ValueError, TypeError):
                continue
            self.tasks[job, batch, table, task] = (messages, size)

    def done(self, job: int, first: int, last: int) -> tuple[int, int]:
        told = [v for (j, b, _, _), v in list(self.tasks.items()) if j == job and first <= b <= last]
        return sum(m for m, _ in told), sum(b for _, b in told)

    def forget(self, job: int, first: int, last: int) -> None:
        for key in [k for k in list(self.tasks) if k[0] == job and first <= k[1] <= last]:
            self.tasks.pop(key, None)


def listener(spark_conf: dict) -> _Listener:
    global _listener
    with _lock:
        if _listener is None:
            host = spark_conf.get("spark.driver.host") or os.environ.get("SPARK_LOCAL_IP") or "127.0.0.1"
            _listener = _Listener(host)
        return _listener


class BatchProgress:
    """Watches one emit of a node's share of batches `first`–`last`, while the block runs."""

    def __init__(self, log, feed: str, job_id: int, first: int, last: int, kind: str, spark_conf: dict):
        self.log, self.feed, self.job_id, self.first, self.last, self.kind = log, feed, job_id, first, last, kind
        self.listener = listener(spark_conf)
        self.expected = 0
        self.started = self.last_time = time.monotonic()
        self.last_count, self.rate = 0, 0.0
        self.stop = threading.Event()
        self.said = False

    @property
    def address(self) -> str:
        return self.listener.address

    def attempt(self) -> None:
        """An attempt at the batches starts (again, after a retry): nothing told or expected yet."""
        self.expected = 0
        self.listener.forget(self.job_id, self.first, self.last)

    def expect(self, rows: int) -> None:
        self.expected += rows

    def __enter__(self) -> BatchProgress:
        threading.Thread(target=self._watch, name=f"progress-{self.feed}", daemon=True).start()
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.stop.set()
        if self.said:  # its bar ends: full when emitted, where it stood when not
            self._say(done=True, failed=error is not None)
        self.listener.forget(self.job_id, self.first, self.last)

    def _watch(self) -> None:
        while not self.stop.wait(TICK):
            if self.expected and (self.kind in ("scan", "backfill") or self.expected >= LARGE):
                self._say()

    def _say(self, done: bool = False, failed: bool = False) -> None:
        messages, size = self.listener.done(self.job_id, self.first, self.last)
        total = messages if done and not failed else max(self.expected, messages)
        now = time.monotonic()
        if messages > self.last_count:  # rows a second lately (the JVM's start and the first reads count not)
            recent = (messages - self.last_count) / (now - self.last_time)
            self.rate = recent if not self.rate else (self.rate + recent) / 2
            self.last_count, self.last_time = messages, now
        elif self.last_count == 0:
            self.last_time = now
        batches = f"batch {self.first}" if self.first == self.last else f"batches {self.first}–{self.last}"
        self.said = True
        try:
            self.log(f"{self.feed}: {batches} ({self.kind}): {messages} of ~{total} rows emitted",
                     event="progress", feed=self.feed, job_id=self.job_id, batch=self.last, kind=self.kind,
                     rows=messages, rows_total=total, bytes=size, seconds=round(now - self.started, 1),
                     rate=round(self.rate), done=done,
                     eta_seconds=round((total - messages) / self.rate) if self.rate and not done else None)
        except Exception:  # how a batch is shown must never fail it
            pass
