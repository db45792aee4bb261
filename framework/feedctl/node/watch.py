"""One look per poll for every job a --follow node works: the store read once for all of them
(`state/watched.py`) and each table's log once, whatever the number of feeds reading it. A job whose mark,
the nodes' or one of its tables' newest version changed is woken; the others sleep.

A node's cost then grows with the work rather than with its feeds: a job's coordinator steps when woken, or
when time alone moves the job on (a version it recorded is old enough to cut, its resolved timestamp or its
end is due), and its spans look for a batch when woken. A wake this look misses costs latency, never a
change: every sleep ends within the coordinator's `LOOK_AGAIN`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from feedctl.source.delta import DeltaSource
from feedctl.state import watched
from feedctl.state.store import StateStore


@dataclass
class _Watched:
    tables: tuple[tuple[str, str, str], ...]  # (name, location, storage options) of each table it reads
    wakes: tuple[threading.Event, ...]
    mark: int | None = None


@dataclass
class _Table:
    source: DeltaSource
    version: int | None = None
    readers: set[int] = field(default_factory=set)


class NodeWatch:
    def __init__(self, store: StateStore, poll_interval: float, liveness_ttl: float, span_grace: float):
        self.store, self.poll_interval = store, poll_interval
        self.liveness_ttl, self.span_grace = liveness_ttl, span_grace
        self._lock = threading.Lock()
        self._jobs: dict[int, _Watched] = {}
        self._nodes: int | None = None
        self._tables: dict[tuple[str, str, str], _Table] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, job_id: int, sources: dict[str, DeltaSource], wakes: list[threading.Event]) -> None:
        """Wake `wakes` whenever job `job_id`, the nodes or the tables of `sources` change."""
        keys = {(s.name, s.location, repr(sorted((s.storage_options or {}).items()))): s for s in sources.values()}
        with self._lock:
            self._jobs[job_id] = _Watched(tuple(keys), tuple(wakes))
            for key, source in keys.items():
                if key not in self._tables:  # a source of its own: the feeds' are read by their threads
                    self._tables[key] = _Table(source.handle())
                self._tables[key].readers.add(job_id)

    def remove(self, job_id: int) -> None:
        with self._lock:
            watched_job = self._jobs.pop(job_id, None)
            for key in watched_job.tables if watched_job else ():
                table = self._tables[key]
                table.readers.discard(job_id)
                if not table.readers:
                    del self._tables[key]

    def __enter__(self) -> NodeWatch:
        """Look every poll interval until the block ends."""
        self._thread = threading.Thread(target=self._serve, name="node-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _serve(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self.look()
            except Exception:  # the store away: everyone looks for themselves, meets the failure and says it
                self._wake(list(self._jobs))

    def look(self) -> None:
        with self._lock:
            jobs = dict(self._jobs)
            tables = dict(self._tables)
        if not jobs:
            return
        with self.store.reading() as conn:
            nodes = watched.nodes_mark(conn, self.liveness_ttl, self.span_grace)
            marks = watched.job_marks(conn, list(jobs))
        woken = set(jobs) if nodes != self._nodes else set()
        self._nodes = nodes
        for job_id, job in jobs.items():
            if marks.get(job_id) != job.mark:
                job.mark = marks.get(job_id)
                woken.add(job_id)
        for table in tables.values():
            try:
                version = table.source.latest_version()
            except Exception:  # the coordinators reading it meet the error themselves and say it
                version = None
            if version is None or version != table.version:
                table.version = version
                woken |= table.readers
        self._wake(woken)

    def _wake(self, job_ids) -> None:
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            for wake in job.wakes if job else ():
                wake.set()
