"""A staged span's messages, paired once for every feed of a node that takes the same staged files. Feeds over
one table whose batches hold the same versions staged the same way share one staging
(`source/shared_staging.py`), and a small batch is written by the node itself (`tasks/batch.py:run_here`):
the first feed to emit such a span pairs its before and after images into messages, the others due meanwhile
wait for it and take them, and each feed then encodes them its own way (format, envelope, options) into its
own sink. Over 300 feeds on four tables, pairing was an eighth of what the node's Python did under load.

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
    frames: list[pl.DataFrame] | None = None
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
        with self._lock:
            entry = self._entries.get(key)
            first = entry is None
            if first:
                entry = self._entries[key] = _Entry()
            else:
                self._entries.move_to_end(key)
        if not first:
            entry.ready.wait()
            if entry.frames is None:  # its pairing failed: this feed pairs for itself, and meets the error
                return pair()
            with self._lock:
                self.taken += 1
            return entry.frames
        try:
            entry.frames = pair()
        except BaseException:
            with self._lock:
                self._forget(key, entry)
            raise
        finally:
            entry.ready.set()
        with self._lock:
            self.paired += 1
            entry.rows = sum(f.height for f in entry.frames)
            if entry.rows > MAX_SPAN_ROWS:
                self._forget(key, entry)
            elif key in self._entries:
                self._rows += entry.rows
                while self._rows > self.max_rows and len(self._entries) > 1:
                    _, old = self._entries.popitem(last=False)
                    self._rows -= old.rows
        return entry.frames

    def _forget(self, key: Hashable, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
