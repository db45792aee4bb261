"""Changes read once for every feed of a node that reads the same versions of a table the same way: the same
columns and condition pushed down, the same event timestamps, key and spans, and the same of this node's
spans. The first feed due stages them; the others due meanwhile wait for it and take its files. The files go
once every batch holding them has been emitted. A feed behind the others (a slow or failing sink) finds them
gone and reads again: it never holds back the others, nor they it. Feeds staging different ranges of a table
take the versions another read a while ago from the node's memory (`version_cache`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from feedctl.source.version_cache import VersionCache

Staged = Any  # `source.stage.Staged`, which imports this module


@dataclass
class _Entry:
    ready: threading.Event = field(default_factory=threading.Event)
    staged: Staged | None = None
    holders: set[Hashable] = field(default_factory=set)


class SharedStaging:
    def __init__(self):
        self.versions = VersionCache()  # each version's change rows, for ranges staged apart
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._cleared: set[str] = set()
        self.reads = 0  # stagings that read from Delta
        self.taken = 0  # stagings taken from another feed's read

    def folder(self, area, node: str) -> str:
        """Where this node stages what it shares in `area`; what an earlier process of the node left there
        (killed before its batches were emitted) is removed the first time (a node id has one live process)."""
        folder = area.join("shared", node)
        with self._lock:
            if folder not in self._cleared:
                self._cleared.add(folder)
                area.remove(folder)
        return folder

    def stage(self, key: Hashable, holder: Hashable, read: Callable[[], Staged]) -> Staged:
        """The changes `key` names, read by `read` unless another feed's batch read them and holds them;
        `holder` (a job's batch) holds them until it releases them. Taken from another's read, they are
        marked `taken`."""
        with self._lock:
            entry = self._entries.get(key)
            first = entry is None
            if first:
                entry = self._entries[key] = _Entry()
            entry.holders.add(holder)
        if not first:
            entry.ready.wait()
            if entry.staged is not None:
                with self._lock:
                    self.taken += 1
                return replace(entry.staged, taken=True)
            return self.stage(key, holder, read)  # its reader failed: this one tries itself
        try:
            entry.staged = read()
            with self._lock:
                self.reads += 1
            return entry.staged
        except BaseException:
            with self._lock:
                del self._entries[key]
            raise
        finally:
            entry.ready.set()

    def release(self, holder: Hashable, key: Hashable | None = None) -> None:
        """`holder` no longer needs the changes `key` names (None: any); those nobody holds are removed."""
        gone = []
        with self._lock:
            for k, entry in list(self._entries.items()):
                if (key is None or k == key) and entry.ready.is_set() and holder in entry.holders:
                    entry.holders.discard(holder)
                    if not entry.holders:
                        del self._entries[k]
                        gone.append(entry.staged)
        for staged in gone:
            if staged is not None and staged.path is not None:
                staged.area.remove(staged.path)
