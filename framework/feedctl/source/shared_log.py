"""A table's log as the feeds of one node read it: each commit and each schema change read once, for every
feed over the table. Each feed's coordinator reading the log through its own handle read a commit once per
feed: a thousand feeds over fifty tables on three nodes had every commit read by seven jobs of each node, each
read a dozen system calls in a busy node, where each call let the interpreter go and waited for it back.

One handle, behind a lock: a delta-rs table is refreshed in place, so a handle is not shared across threads.
A range is read under the lock; a feed far behind reads its long range through its own handle rather than
holding up the others (a catch-up's commits are no one else's)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from feedctl.source.delta import Commit, DeltaSource
from feedctl.source.schema_change import SchemaChange

SHARED_RANGE = 64  # versions at most in a range read through the shared handle


class SharedLog:
    def __init__(self, source: DeltaSource):
        self._source = source.handle()
        self._lock = threading.Lock()

    def of(self, own: DeltaSource) -> FeedLog:
        """The log as a feed reads it, `own` its handle of the table: what `DeltaSource` says of it."""
        return FeedLog(self._lock, self._source, own)

    def read_ahead(self, after_version: int, up_to: int) -> None:
        """Read the commits of a range the node's watch just found, and whether they change the schema, before
        the feeds over the table are told of them: their cuts then find both in memory. A failure is left to
        the feeds, which read again and say it."""
        if up_to - after_version > SHARED_RANGE:
            return
        try:
            with self._lock:
                self._source.commits(after_version, up_to)
                self._source.schema_changes(after_version, up_to)
        except Exception:
            pass


@dataclass(frozen=True)
class FeedLog:
    lock: threading.Lock  # the shared handle's
    shared: DeltaSource
    own: DeltaSource

    def commits(self, after_version: int, up_to: int) -> list[Commit]:
        if up_to - after_version > SHARED_RANGE:
            return self.own.commits(after_version, up_to)
        with self.lock:
            return self.shared.commits(after_version, up_to)

    def schema_changes(self, after_version: int, up_to: int) -> list[int]:
        """With the commits read here, a range of commits changing no metadata costs no schema read; a long
        range is read by the handle that read its commits."""
        if up_to - after_version > SHARED_RANGE:
            return self.own.schema_changes(after_version, up_to)
        with self.lock:
            return self.shared.schema_changes(after_version, up_to)

    def schema_change(self, version: int) -> SchemaChange:
        with self.lock:
            return self.shared.schema_change(version)
