"""A job's coordinator alone in the test's process, over real Delta tables, a real state store and a file sink,
with no Spark: the test plays the nodes, each marking its spans of their next batch emitted, as a node does
once Spark wrote them. What the coordinator decides (batches cut, spans placed, the high-water mark, resolved
timestamps, tables added, keys changed, failures) is then seen step by step, in milliseconds."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

from feedctl.compiler.compile import compile_project
from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.job_coordinator import JobCoordinator
from feedctl.job.revision import declared_keys
from feedctl.job.start import create_job, starting
from feedctl.node.runner import RunReport, RunSettings
from feedctl.sinks.registry import open_sink
from feedctl.source.delta import DeltaSource
from feedctl.state import jobs, progress, spans
from feedctl.state.store import StateStore
from feedctl.units import Hlc


class Transactions:
    """How many transactions of each kind a block opens on a store."""

    def __init__(self, store: StateStore):
        self.writes = self.reads = 0
        transaction, reading = store.transaction, store.reading

        @contextmanager
        def counted_transaction():
            self.writes += 1
            with transaction() as conn:
                yield conn

        @contextmanager
        def counted_reading():
            self.reads += 1
            with reading() as conn:
                yield conn

        store.transaction, store.reading = counted_transaction, counted_reading

    def reset(self) -> None:
        self.writes = self.reads = 0


class CoordinatorAlone:
    def __init__(self, root: Path, feed: str, node: str = "n1", **settings):
        result = compile_project(root, lenient_columns=True)
        self.project, self.compiled = result.project, result.feeds[feed]
        self.store = StateStore.of_project(self.project)
        self.settings = RunSettings(node_id=node, closed_lag=0.0, retries=0, **settings)
        self.events: list[dict] = []
        sink_def = self.project.sinks[self.compiled.feed.sink]
        self.sink = open_sink(sink_def.uri, sink_def.options, str(self.project.root))
        sources = {t: self._source(t) for t in self.compiled.tables}
        job = create_job(
            self.project,
            starting(self.compiled, self.settings, None, self.sink),
            sources,
            self.store,
            self.sink,
            self.log,
        )
        self.job_id = job.job_id
        self.report = RunReport(feed, job.job_id, job.status)
        retrying = Retrying(
            feed,
            node,
            0,
            Backoff(0.001, 0.001, lambda: Hlc(0)),
            None,
            "",
            threading.Event(),
            lambda: self.compiled.options,
            self.log,
        )
        self.coordinator = JobCoordinator(
            self.store,
            job,
            self.settings,
            self.compiled,
            sources,
            {t: self.project.tables[t].locality for t in sources},
            declared_keys(self.project, list(sources)),
            self.sink,
            None,
            self.report,
            self.log,
            retrying,
        )
        self.coordinator.epoch = self.coordinator.claim()
        self.transactions = Transactions(self.store)

    def _source(self, table: str) -> DeltaSource:
        t = self.project.tables[table]
        return DeltaSource(table, t.location, t.storage_options)

    def log(self, message: str, **fields) -> None:
        self.events.append({"message": message, **fields})

    def step(self) -> bool:
        return self.coordinator.step()

    def job(self) -> jobs.Job:
        with self.store.reading() as conn:
            return jobs.get_job(conn, self.job_id)

    def emit(self, node: str | None = None) -> int | None:
        """The node's spans emit the next batch they have not: recorded as emitted (None: no batch waits)."""
        node = node or self.settings.node_id
        with self.store.transaction() as conn:
            mine = [s for s in spans.of_job(conn, self.job_id) if s.node == node]
            if not mine:
                return None
            seq = min(s.batch_seq for s in mine) + 1
            intent = progress.intent(conn, self.job_id, seq)
            if intent is None:
                return None
            keys = [s.key for s in mine if s.batch_seq == seq - 1]
            spans.emitted(conn, self.job_id, node, keys, seq, intent.target, after=seq - 1)
        return seq

    def intents(self) -> list[progress.Intent]:
        with self.store.reading() as conn:
            return progress.pending_intents(conn, self.job_id)

    def close(self) -> None:
        self.store.close()
