"""Small writes of many jobs committed in one transaction (a group commit), by the threads that hand them in. A
--follow node's steady jobs tick every resolved interval (`coordinator/steady.py`), each tick a fenced statement
or two; with a transaction each, a node of 100 such feeds spent most of its idle time beginning and committing
(0.39 ms of CPU a transaction of one statement, against 0.14 ms a statement among a hundred in one). So do its
coordinators' looks at their leases, in one snapshot rather than a transaction, and their claims. (Its feeds'
steps, which have no thread each, ask `node/scheduler.Gathered` instead.)

No thread of its own: the first writer to arrive leads, committing what the others hand in meanwhile, group
after group, until no write waits (as a database's own group commit)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from feedctl.state.store import STORE_ERRORS, StateStore

# Seconds a leader waits before taking the first group: the ticks of a node's steady jobs are due at the same
# instant, and their threads wake one after another.
GATHER = 0.002


@dataclass
class _Write:
    key: int
    write: Callable[[Connection], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class GroupCommit:
    def __init__(
        self, store: StateStore, together: Callable[[Connection, list], list] | None = None, reading: bool = False
    ):
        """`together(conn, items)`: writes the items a group's writers handed in, in as few statements as it
        can, returning each one's result in order (`run` then takes an item rather than a write). `reading`:
        the items are read, each group in a snapshot (`store.reading`) rather than a transaction."""
        self.store, self.together, self.reading = store, together, reading
        self._lock = threading.Lock()
        self._waiting: list[_Write] = []
        self._leading = False
        self.groups = 0  # transactions committed for groups, for the tests

    def run(self, key: int, write: Callable[[Connection], Any]) -> Any:
        """Run `write` in a transaction shared with the writes other threads hand in meanwhile, and return
        what it returned once that transaction has committed. `key` (a job id) orders the group's writes, so
        that two nodes' groups lock rows in one order. `write` is one fenced statement: when it raises (a
        lease lost, a job no longer running) it wrote nothing, and it fails alone; a store error fails every
        write of the group, none of them committed. With `together`, `write` is an item it writes."""
        mine = _Write(key, write)
        with self._lock:
            self._waiting.append(mine)
            lead, self._leading = not self._leading, True
        if lead:
            self._lead()
        mine.done.wait()
        if mine.error is not None:
            raise mine.error
        return mine.result

    def _lead(self) -> None:
        time.sleep(GATHER)
        try:
            while True:
                with self._lock:
                    group, self._waiting = self._waiting, []
                    if not group:
                        self._leading = False
                        return
                self._commit(group)
        except BaseException as exc:  # the writes left waiting fail with it, rather than wait for a leader
            with self._lock:
                left, self._waiting, self._leading = self._waiting, [], False
            for w in left:
                w.error = exc
                w.done.set()
            raise

    @staticmethod
    def _each(conn: Connection, group: list[_Write]) -> None:
        for w in group:
            try:
                w.result = w.write(conn)
            except STORE_ERRORS:
                raise
            except Exception as exc:  # nothing written by it: the others go on
                w.error = exc

    def _commit(self, group: list[_Write]) -> None:
        group.sort(key=lambda w: w.key)
        try:
            with (self.store.reading if self.reading else self.store.transaction)(node=True) as conn:
                if self.together is not None:
                    for w, result in zip(group, self.together(conn, [w.write for w in group]), strict=True):
                        w.result = result
                else:
                    self._each(conn, group)
            self.groups += 1
        except BaseException as exc:
            for w in group:
                w.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for w in group:
                w.done.set()
