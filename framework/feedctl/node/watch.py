"""One look per poll for every job a --follow node works: the store read once for all of them
(`node/watch_marks.py`) and each table's log once, whatever the number of feeds reading it. A job's coordinator
is woken when the nodes, one of its tables' newest version or what it reacts to of the job changed; its
spans when the nodes or what they react to changed; the others sleep. Neither is woken by what the other
did on this node: a cut wakes the spans, an emitted batch the coordinator, directly.

A node's cost then grows with the work rather than with its feeds: a job's coordinator steps when woken, or
when time alone moves the job on (a version it recorded is old enough to cut, its resolved timestamp or its
end is due), and its spans look for a batch when woken. A wake this look misses costs latency, never a
change: every sleep ends within the coordinator's `LOOK_AGAIN`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from feedctl.coordinator.lease import holder_id
from feedctl.node import watch_marks
from feedctl.source.delta import DeltaSource
from feedctl.source.shared_log import SharedLog
from feedctl.state.store import StateStore


@dataclass
class _Watched:
    tables: tuple[tuple[str, str, str, str], ...]  # each table it reads (`_key`)
    coordinator: threading.Event  # wakes the job's coordinator on this node
    spans: threading.Event  # wakes its spans on this node
    moved: Callable[[], None]  # tells it a table it reads has a new version
    emitted: Callable[[], None]  # tells its coordinator here that spans of other nodes emitted a batch
    marks: watch_marks.JobMarks | None = None


@dataclass
class _Table:
    source: DeltaSource
    log: SharedLog  # its commits and schema changes, read once for the node's feeds over it
    version: int | None = None
    seen_at: float = 0.0  # when the look that found `version` began (monotonic)
    readers: set[int] = field(default_factory=set)


class NodeWatch:
    def __init__(self, store: StateStore, node_id: str, poll_interval: float, liveness_ttl: float, span_grace: float):
        self.store, self.node_id, self.poll_interval = store, node_id, poll_interval
        self.holder = holder_id(node_id)  # as this node's coordinators hold leases
        self._marks = watch_marks.WatchMarks(node_id, self.holder)
        self.liveness_ttl, self.span_grace = liveness_ttl, span_grace
        self._lock = threading.Lock()
        self._jobs: dict[int, _Watched] = {}
        self._nodes: int | None = None
        self._tables: dict[tuple[str, str, str, str], _Table] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def add(
        self,
        job_id: int,
        sources: dict[str, DeltaSource],
        coordinator: threading.Event,
        spans: threading.Event,
        moved: Callable[[], None] | None = None,
        emitted: Callable[[], None] | None = None,
    ) -> None:
        """Wake job `job_id`'s `coordinator` and `spans` whenever the nodes change, and each when what it reacts
        to of the job changes (`watch_marks.WatchMarks`); call `moved` (else wake the coordinator) when a table of
        `sources` has a new version, and `emitted` (else wake the coordinator) when, this node coordinating the
        job, spans of other nodes emitted a batch and nothing else changed for the coordinator."""
        keys = {_key(s): s for s in sources.values()}
        with self._lock:
            self._jobs[job_id] = _Watched(
                tuple(keys), coordinator, spans, moved or coordinator.set, emitted or coordinator.set
            )
            for key, source in keys.items():
                if key not in self._tables:  # a source of its own: the feeds' are read by their threads
                    self._tables[key] = _Table(source.handle(), SharedLog(source))
                self._tables[key].readers.add(job_id)

    def newest(self, source: DeltaSource, within: float) -> int | None:
        """The newest version of `source`'s table, as a look begun within the last `within` seconds found it
        (None: no such look), for the coordinators of the feeds reading it: one look at its log per poll."""
        with self._lock:
            table = self._tables.get(_key(source))
        if table is None or table.version is None or time.monotonic() - table.seen_at > within:
            return None
        return table.version

    def log(self, source: DeltaSource) -> SharedLog | None:
        """The log of `source`'s table as the node's feeds over it read it (None: no job here reads it)."""
        with self._lock:
            table = self._tables.get(_key(source))
        return table.log if table is not None else None

    def remove(self, job_id: int) -> None:
        with self._lock:
            watched_job = self._jobs.pop(job_id, None)
            for key in watched_job.tables if watched_job else ():
                table = self._tables[key]
                table.readers.discard(job_id)
                if not table.readers:
                    del self._tables[key]

    def __enter__(self) -> NodeWatch:
        """Look every poll interval until the block ends: at the store and at the tables' logs each on a
        thread of its own. Under a node's load a look at the store takes seconds (500 jobs' rows, each row
        read letting the interpreter go to another of the node's threads): behind it, a commit was seen once
        in 4-7 s rather than within the poll interval."""
        self._threads = [
            threading.Thread(target=self._serve, args=(look,), name=name, daemon=True)
            for look, name in ((self.look_at_store, "node-watch"), (self.look_at_tables, "node-watch-tables"))
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _serve(self, look: Callable[[], None]) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                look()
            except Exception:  # the store away: everyone looks for themselves, meets the failure and says it
                self._wake(list(self._jobs), list(self._jobs))

    def look(self) -> None:
        """One look at the store, then at every table."""
        self.look_at_store()
        self.look_at_tables()

    def look_at_store(self) -> None:
        """Wake the coordinators and the spans of the jobs whose marks changed (every job's, when the nodes
        did), and tell the coordinators of those whose other nodes' spans alone emitted."""
        with self._lock:
            jobs = dict(self._jobs)
        if not jobs:
            return
        with self.store.reading(node=True) as conn:
            nodes = watch_marks.nodes_mark(conn, self.liveness_ttl, self.span_grace, self.node_id)
            marks = self._marks.marks(conn, list(jobs))
        everyone = set(jobs) if nodes != self._nodes else set()
        self._nodes = nodes
        coordinators, spans, emitted = set(everyone), set(everyone), set()
        for job_id, job in jobs.items():
            now, was = marks[job_id], job.marks
            job.marks = now
            if was is None or now.coordinator != was.coordinator:
                coordinators.add(job_id)
            elif now.emitted != was.emitted:
                emitted.add(job_id)
            if was is None or now.spans != was.spans:
                spans.add(job_id)
        self._wake(coordinators, spans, emitted=emitted - coordinators)

    def look_at_tables(self) -> None:
        """Tell the jobs reading a table that has a new version (the spans wait for the batch their
        coordinator cuts of it)."""
        with self._lock:
            tables = list(self._tables.values())
        moved = set()
        for table in tables:
            began = time.monotonic()
            try:
                version = table.source.newest_version(table.version)
            except Exception:  # the coordinators reading it meet the error themselves and say it
                version = None
            table.seen_at = began
            if version is not None and table.version is not None and version > table.version:
                table.log.read_ahead(table.version, version)  # before the feeds are told: their cuts need it
            if version is None or version != table.version:
                table.version = version
                moved |= table.readers
        self._wake((), (), moved)

    def _wake(self, coordinators, spans, moved=(), emitted=()) -> None:
        for job_id in coordinators:
            job = self._jobs.get(job_id)
            if job is not None:
                job.coordinator.set()
        for job_id in emitted:
            job = self._jobs.get(job_id)
            if job is not None:
                job.emitted()
        for job_id in moved:
            job = self._jobs.get(job_id)
            if job is not None:
                job.moved()
        for job_id in spans:
            job = self._jobs.get(job_id)
            if job is not None:
                job.spans.set()


def _key(source: DeltaSource) -> tuple[str, str, str, str]:
    options = repr(sorted((source.storage_options or {}).items()))
    return source.name, source.location, options, source.change_source.value  # how a commit's rows are counted
