"""A staged span's messages, paired once for every feed of a node that takes the same staged files. Feeds over
one table whose batches hold the same versions staged the same way share one staging
(`source/shared_staging.py`), and a small batch is written by the node itself (`tasks/batch.py:run_here`):
the first feed to emit such a span pairs its before and after images into messages, the others due meanwhile
wait for it and take them. Over 300 feeds on four tables, pairing was an eighth of what the node's Python did
under load. So are the messages encoded once for the feeds that write them the same way (format, envelope,
topic), each into its own sink: over 500 feeds on four tables, encoding was then a quarter of it.

Only a shared staging's spans are kept: its folder is named once, for those rows alone, so its path names what
they hold. Kept while small, the least recently used going first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import polars as pl

MAX_ROWS = 200_000  # messages kept in all
MAX_SPAN_ROWS = 20_000  # a span's messages kept at most: a larger batch goes to Spark anyway


@dataclass
class _Entry:
    ready: threading.Event = field(default_factory=threading.Event)
    value: object = None
    rows: int = 0


class SharedViews:
    def __init__(self, max_rows: int = MAX_ROWS):
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._rows = 0
        self.paired = 0  # spans paired here
        self.taken = 0  # spans whose messages another feed's batch had paired

    def messages(self, key: Hashable, pair: Callable[[], list[pl.DataFrame]]) -> list[pl.DataFrame]:
        """The messages `key` names (a shared staging's span, its columns, key and `diff`), paired by `pair`
        unless another feed's batch paired them; their frames are not to be changed."""
        frames, first = self._shared(("messages", key), pair, lambda frames: sum(f.height for f in frames))
        with self._lock:
            if first:
                self.paired += 1
            else:
                self.taken += 1
        return frames

    def encoded(self, key: Hashable, encode: Callable[[], tuple], rows: int):
        """A frame of shared messages encoded one way (`key`: the frame's and the way's), by `encode` unless
        another feed's batch encoded it so: feeds over one table writing the same format, envelope and topic
        (each into its own sink) encode each message once. Its `rows` count as the frame's."""
        return self._shared(("encoded", key), encode, lambda _: rows)[0]

    def _shared(
        self, key: Hashable, make: Callable[[], object], rows_of: Callable[[object], int]
    ) -> tuple[object, bool]:
        """What `key` names, made by `make` unless another thread made it (or is making it: this one waits);
        and whether this call made it. Kept while small, the least recently used going first."""
        with self._lock:
            entry = self._entries.get(key)
            first = entry is None
            if first:
                entry = self._entries[key] = _Entry()
            else:
                self._entries.move_to_end(key)
        if not first:
            entry.ready.wait()
            if entry.value is None:  # making it failed: this thread makes it for itself, and meets the error
                return make(), True
            return entry.value, False
        try:
            entry.value = make()
        except BaseException:
            with self._lock:
                self._forget(key, entry)
            raise
        finally:
            entry.ready.set()
        with self._lock:
            entry.rows = rows_of(entry.value)
            if entry.rows > MAX_SPAN_ROWS:
                self._forget(key, entry)
            elif key in self._entries:
                self._rows += entry.rows
                while self._rows > self.max_rows and len(self._entries) > 1:
                    _, old = self._entries.popitem(last=False)
                    self._rows -= old.rows
        return entry.value, True

    def _forget(self, key: Hashable, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
