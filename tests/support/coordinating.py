"""A job's coordinator alone in the test's process, over real Delta tables, a real state store and a file sink,
with no Spark: the test plays the nodes, each marking its spans of their next batch emitted, as a node does
once Spark wrote them. What the coordinator decides (batches cut, spans placed, the high-water mark, resolved
timestamps, tables added, keys changed, failures) is then seen step by step, in milliseconds."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from feedctl.compiler.compile import compile_project
from feedctl.compiler.read_plan import Pushdown
from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.job_coordinator import JobCoordinator
from feedctl.job import rollout, table_change
from feedctl.job.definition import definition_of
from feedctl.job.revision import Wanted, declared_keys, view
from feedctl.job.start import create_job, starting
from feedctl.node.settings import RunReport, RunSettings
from feedctl.sinks.registry import open_sink
from feedctl.source.delta import DeltaSource
from feedctl.spark.place import SparkPlace
from feedctl.state import batch_intents, jobs, nodes, sequence, spans
from feedctl.state.store import StateStore
from feedctl.units import Hlc


class Transactions:
    """How many transactions of each kind a block opens on a store."""

    def __init__(self, store: StateStore):
        self.writes = self.reads = 0
        transaction, reading = store.transaction, store.reading

        @contextmanager
        def counted_transaction(node: bool = False):
            self.writes += 1
            with transaction(node) as conn:
                yield conn

        @contextmanager
        def counted_reading(node: bool = False):
            self.reads += 1
            with reading(node) as conn:
                yield conn

        store.transaction, store.reading = counted_transaction, counted_reading

    def reset(self) -> None:
        self.writes = self.reads = 0


class CoordinatorAlone:
    """`step()` the coordinator as the lease holder does; `emit(node)` as a node records what Spark wrote;
    `take(root)` a changed project, as a node's runner hands it to its coordinator."""

    def __init__(self, root: Path, feed: str, node: str = "n1", **settings):
        self.root, self.feed_name = root, feed
        result = compile_project(root, lenient_columns=True)
        self.project, self.compiled = result.project, result.feeds[feed]
        self.store = StateStore.of_project(self.project)
        self.settings = RunSettings(**{"node_id": node, "closed_lag": 0.0, "retries": 0, **settings})
        self.events: list[dict] = []
        self.nodes: dict[str, nodes.Node] = {}
        sink_def = self.project.sinks[self.compiled.feed.sink]
        self.sink = open_sink(sink_def.uri, sink_def.options, str(self.project.root))
        self.join(node)
        self.loaded = self._tick()
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
        self.coordinator = self._coordinator(job)
        self.transactions = Transactions(self.store)

    def _coordinator(self, job: jobs.Job) -> JobCoordinator:
        """A coordinator of the job from this copy of the project, holding the lease, as a runner makes it."""
        sources = {t: self._source(t) for t in definition_of(job).tables_ever()}
        pushdown = {t: self.compiled.pushdown.get(t) or Pushdown(columns=None) for t in sources}
        retrying = Retrying(
            self.feed_name,
            self.settings.node_id,
            self.settings.retries,
            Backoff(0.001, 0.001, lambda: Hlc(0)),
            None,
            SparkPlace(),
            threading.Event(),
            lambda: self.compiled.options,
            self.log,
        )
        coordinator = JobCoordinator(
            self.store,
            job,
            self.settings,
            replace(self.compiled, options=definition_of(job).options, pushdown=pushdown),
            sources,
            {t: self.project.tables[t].locality for t in sources},
            declared_keys(self.project, [t for t in sources if t in self.project.tables]),
            self.sink,
            None,
            self.report,
            self.log,
            retrying,
        )
        coordinator.epoch = coordinator.claim()
        return coordinator

    def _source(self, table: str) -> DeltaSource:
        t = self.project.tables[table]
        return DeltaSource(table, t.location, t.storage_options)

    def _tick(self) -> int:
        with self.store.transaction() as conn:
            return sequence.tick(conn)

    def log(self, message: str, **fields) -> None:
        self.events.append({"message": message, **fields})

    def said(self, event: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == event]

    def join(self, node: str, locality: str = "") -> None:
        """A node working the feed: live while this process is."""
        with self.store.transaction() as conn:
            self.nodes[node] = nodes.register(conn, node, locality, feeds=(self.feed_name,))

    def drain(self, node: str) -> None:
        """The node leaves as a drained one does (`node/membership.py`): at its batch boundary its spans are
        left unplaced, then it deregisters."""
        with self.store.transaction() as conn:
            spans.boundary(conn, node, release=True)
            nodes.deregister(conn, self.nodes.pop(node))

    def take(self) -> None:
        """The project at `root` changed: compiled again, this node's copy of it published, and handed to the
        coordinator, which records what the job takes of it once every node working the feed has it."""
        result = compile_project(self.root, lenient_columns=True)
        self.project, self.compiled = result.project, result.feeds[self.feed_name]
        copy = rollout.Copy(self.project, self.compiled, self._tick())
        rollout.publish(self.store, self.settings.node_id, copy, self.job(), self.log)
        self.coordinator.wanted = Wanted(
            self.project,
            self.compiled,
            view(self.project, self.compiled),
            declared_keys(self.project, [t for t in self.coordinator.sources if t in self.project.tables]),
        )

    def step(self) -> bool:
        """One step; a job that now reads a table the coordinator has no source for gets a coordinator made
        again from the latest copy of the project (a runner starts again: `table_change.Rejoin`)."""
        try:
            return self.coordinator.step()
        except table_change.Rejoin:
            wanted = self.coordinator.wanted
            self.coordinator.release()
            self.coordinator = self._coordinator(self.job())
            self.coordinator.wanted = wanted
            return self.coordinator.step()

    def job(self) -> jobs.Job:
        with self.store.reading() as conn:
            return jobs.get_job(conn, self.job_id)

    def emit(self, node: str | None = None) -> int | None:
        """The node's spans emit the next batch they have not: recorded as emitted (None: no batch waits)."""
        node = node or self.settings.node_id
        with self.store.transaction() as conn:
            spans.boundary(conn, node, self.job_id)  # spans bound for another node go there first
            mine = [s for s in spans.of_job(conn, self.job_id) if s.node == node]
            if not mine:
                return None
            seq = min(s.batch_seq for s in mine) + 1
            intent = batch_intents.intent(conn, self.job_id, seq)
            if intent is None:
                return None
            keys = [s.key for s in mine if s.batch_seq == seq - 1]
            spans.emitted(conn, [spans.Emitted(self.job_id, node, keys, seq, intent.target, seq - 1)])
        return seq

    def intents(self) -> list[batch_intents.Intent]:
        with self.store.reading() as conn:
            return batch_intents.pending_intents(conn, self.job_id)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> CoordinatorAlone:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
