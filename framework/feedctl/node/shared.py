"""What the feeds of one node share, so that its cost grows with the work rather than with its feeds: their
batches due together go to Spark as one job (`spark_jobs`); changes they stage the same way are read once
(`staging`); on a --follow node, one look per poll at the store and at each table's log for every job
(`watch`), one renewal of every lease it holds (`leases`), shared looks at those it may claim and shared claims
of those found free (`looks`, `takes`), a pool of workers taking its jobs' coordinators' turns (`scheduler`)
and one taking its feeds' steps, their spans' emission among them (`feeds`), one thread ticking its steady
jobs (`ticker`), what it reads of its jobs before emitting their batches read together (`reads`), and the
records of the batches its spans emitted committed together (`records`); its feeds start a few at a time
(`starting`); the state store away is one outage for the node (`store_outage`); and its Kafka producers are
flushed and closed as it drains."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field

from feedctl.coordinator import lease
from feedctl.coordinator.lease import Leases
from feedctl.coordinator.store_outage import StoreOutage
from feedctl.node import emitted_batch, share
from feedctl.node.scheduler import Gathered, Scheduler
from feedctl.node.spark_jobs import SparkJobs
from feedctl.node.ticker import Ticker
from feedctl.node.watch import NodeWatch
from feedctl.sinks import registry
from feedctl.source.shared_staging import SharedStaging
from feedctl.state.group_commit import GroupCommit

# Feeds a --follow node starts at once: finding or making each job, publishing the node's view of it, opening
# its tables' logs and planning its spans are a dozen statements and a few log reads each. 1,000 feeds starting
# together on three nodes kept the pool's connections held for seconds each while their threads waited for the
# interpreter, and hundreds of feeds waited past the pool's timeout and started again.
STARTING_AT_ONCE = 8


@dataclass
class Shared:
    spark_jobs: SparkJobs = field(default_factory=SparkJobs)
    staging: SharedStaging = field(default_factory=SharedStaging)
    watch: NodeWatch | None = None
    leases: Leases | None = None
    looks: GroupCommit | None = None  # its coordinators' looks at their leases, read in snapshots they share
    takes: GroupCommit | None = None  # and their claims of the leases found free, in transactions they share
    ticker: Ticker | None = None
    reads: Gathered | None = None  # each job's batches pending, read in snapshots shared by its feeds' steps
    records: Gathered | None = None  # what its spans emitted, recorded in transactions shared by its feeds' steps
    starting: AbstractContextManager = field(default_factory=nullcontext)  # a feed's turn to start
    store_outage: StoreOutage | None = None  # the state store away, as the node's loops meet it
    scheduler: Scheduler = field(default_factory=Scheduler)  # its jobs' coordinators' turns
    # Its feeds' steps: apart from the coordinators', which a long batch (a scan) emitting must not hold back.
    feeds: Scheduler = field(default_factory=lambda: Scheduler(name="feeds"))

    @classmethod
    def following(cls, store, settings, spark_jobs: SparkJobs, store_outage: StoreOutage) -> Shared:
        """A --follow node's: its watch, its leases' renewal and its ticker run while it is entered."""
        return cls(
            spark_jobs,
            watch=NodeWatch(
                store, settings.node_id, settings.poll_interval, settings.liveness_ttl, settings.span_grace
            ),
            leases=Leases(store, settings.lease_ttl),
            looks=GroupCommit(store, lease.look, reading=True),
            takes=GroupCommit(store, lease.take),
            ticker=Ticker(store),
            reads=Gathered(store, share.pending, reading=True),
            records=Gathered(store, emitted_batch.recorded),
            starting=threading.BoundedSemaphore(STARTING_AT_ONCE),
            store_outage=store_outage,
            scheduler=Scheduler(settings.workers),
            feeds=Scheduler(settings.workers, name="feeds"),
        )

    def __enter__(self) -> Shared:
        self._running = ExitStack()
        for part in (self.watch, self.leases, self.ticker):
            if part is not None:
                self._running.enter_context(part)
        return self

    def __exit__(self, *exc) -> None:
        self._running.close()
        self.feeds.close()
        self.scheduler.close()
        registry.close_clients()  # the node drains: its sinks' clients closed, what a producer holds flushed
