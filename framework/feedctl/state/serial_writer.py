"""A process's writes to a SQLite store: one at a time on one connection, in the order they came.

SQLite lets one transaction write at a time. Each on a pooled connection of its own, a node's writers held most
of the pool while they slept in SQLite's busy handler, its reads waited for a connection, and a Python lock
would not be fair: one feed's writes could pass another's for as long as they kept coming. Here a writer waits
for its turn holding nothing. Another process's writers are met at SQLite's lock, tried for in short pauses:
SQLite's busy handler sleeps up to 100 ms between tries, while the lock may have been free most of that time.

Writers sharing a transaction (a group commit across threads) were tried: over three processes on two cores,
the lock stayed held while the turn passed from thread to thread, each waiting for the interpreter, and the
other processes' writers waited (`BENCHMARKS.md`)."""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection, Engine, RootTransaction
from sqlalchemy.exc import OperationalError

# Seconds between tries at SQLite's write lock while another process holds it, at first and at most.
FIRST_PAUSE, MOST_PAUSE = 0.0005, 0.004


class SerialWriter:
    def __init__(self, engine: Engine, timeout: float = 30.0):
        """`engine`: one connection, whose busy timeout is 0 (this tries for the lock itself, for `timeout`)."""
        self.engine, self.timeout = engine, timeout
        self._lock = threading.Lock()  # guards the queue and whose turn it is
        self._waiting: deque[threading.Event] = deque()
        self._turn_taken = False
        self._holder: int | None = None  # the thread whose turn it is

    @contextmanager
    def transaction(self, first: bool = False) -> Iterator[Connection]:
        """A write transaction, as `Engine.begin()`, once the writers that came before have written. `first`:
        ahead of the writers waiting (the node's renewals, its ticks of many jobs)."""
        self._take_turn(first)
        try:
            conn, transaction = self._begin()
            try:
                yield conn
                transaction.commit()
            except BaseException:
                transaction.rollback()
                raise
            finally:
                conn.close()
        finally:
            self._pass_turn()

    def _begin(self) -> tuple[Connection, RootTransaction]:
        """A transaction holding SQLite's write lock (`BEGIN IMMEDIATE`), tried for until `timeout`."""
        deadline, pause = time.monotonic() + self.timeout, FIRST_PAUSE
        while True:
            conn = self.engine.connect()
            try:
                return conn, conn.begin()
            except OperationalError as exc:
                conn.close()
                if "locked" not in str(exc.orig) or time.monotonic() > deadline:
                    raise
            except BaseException:
                conn.close()
                raise
            time.sleep(pause * random.uniform(0.5, 1.5))  # the processes' tries fall apart
            pause = min(pause * 2, MOST_PAUSE)

    def _take_turn(self, first: bool) -> None:
        with self._lock:
            if self._holder == threading.get_ident():  # it would wait for itself
                raise RuntimeError("a write transaction begun inside another on the same thread")
            if not self._turn_taken:
                self._turn_taken, self._holder = True, threading.get_ident()
                return
            turn = threading.Event()
            if first:
                self._waiting.appendleft(turn)
            else:
                self._waiting.append(turn)
        try:
            turn.wait()  # the writer before hands the turn over: it is this one's once set
            self._holder = threading.get_ident()
        except BaseException:  # interrupted while waiting: never leave the turn with a writer gone
            with self._lock:
                if turn in self._waiting:
                    self._waiting.remove(turn)
                    raise
            self._pass_turn()
            raise

    def _pass_turn(self) -> None:
        with self._lock:
            self._holder = None
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._turn_taken = False
