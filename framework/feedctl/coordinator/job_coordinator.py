"""The coordinator of one job, on the node holding the job's lease: it records new versions' event
timestamps, cuts batches ahead of the spans (at most `batches_ahead` waiting: how far the fastest node may
run ahead of the slowest), places the spans on the live nodes that work the feed (`span_owner`), and moves
the high-water mark as the spans' owners record what they emitted (`frontier`). Every write is fenced by
the lease's epoch. Under --follow it takes turns on the node's scheduler (`following`), standing by while another
node holds the lease; a one-off run steps it between its own batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from feedctl.compiler.compile import CompiledFeed
from feedctl.coordinator import cut, fenced, lease, resolved
from feedctl.coordinator.backoff import Retrying
from feedctl.coordinator.frontier import Frontier
from feedctl.coordinator.job_share import JobShare
from feedctl.coordinator.key_changing import KeyChanging
from feedctl.coordinator.lease import Heartbeat, Leases, holder_id
from feedctl.coordinator.new_versions import NewVersions
from feedctl.coordinator.span_placing import SpanPlacing
from feedctl.coordinator.steady import LOOK_AGAIN, MAX_NAP, Steady, SteadyJob, look_again
from feedctl.coordinator.wait import Wake
from feedctl.errors import ErrorKind
from feedctl.job import rollout, table_change
from feedctl.job.definition import definition_of
from feedctl.job.headroom import HistoryWatch
from feedctl.job.key_change import Key
from feedctl.job.revision import Wanted
from feedctl.options import InitialScan, SchemaChangeAction
from feedctl.sinks.sink import Sink
from feedctl.source import schema_change
from feedctl.source.delta import DeltaSource, SourceError
from feedctl.source.shared_log import SharedLog
from feedctl.state import batch_intents, checkpoints, event_times, jobs, nodes
from feedctl.state.batch_intents import IntentKind
from feedctl.state.group_commit import GroupCommit
from feedctl.state.store import StateStore
from feedctl.units import Hlc


class JobCoordinator(NewVersions, SteadyJob, SpanPlacing, KeyChanging):
    def __init__(
        self,
        store: StateStore,
        job: jobs.Job,
        settings,
        compiled: CompiledFeed,
        sources: dict[str, DeltaSource],
        homes: dict[str, str | None],
        declared: dict[str, Key],
        sink: Sink,
        end_time: Hlc | None,
        report,
        log,
        retrying: Retrying,
        cut: threading.Event | None = None,
    ):
        self.store, self.job_id, self.feed, self.settings = store, job.job_id, job.feed, settings
        self.options, self.pushdown = compiled.options, compiled.pushdown
        self.column_sites = compiled.column_sites  # where the feed's query names each column
        # Handles of its own: a delta-rs table is refreshed in place, so it is not shared across threads.
        self.sources = {t: s.handle() for t, s in sources.items()}
        self.tables = list(definition_of(job).tables)  # those it cuts batches of: not those dropped since
        self.homes = homes  # per table: the locality its data lives in
        self.declared = declared  # per table: the key project.yml declares (`job/key_change.py`)
        self.keys: dict[str, Key] = {}  # per table: the key the job emits it under now
        self.regional: dict[str, str] = {}  # regional-by-row tables → region column: spans per region, homed there
        self.latest: dict[str, int] = {}  # each table's newest version, as the last step saw it
        # A table's newest version as the node's watch saw it within some seconds (`NodeWatch.newest`), when it
        # watches the job: one look at a table's log per poll, whatever the number of feeds reading it.
        self.newest: Callable[[DeltaSource, float], int | None] | None = None
        # A table's log as the node's feeds over it read it (`NodeWatch.log`): each commit read once a node.
        self.logs: Callable[[DeltaSource], SharedLog | None] | None = None
        self.sink, self.end_time, self.report, self.log, self.retrying = sink, end_time, report, log, retrying
        self.topics = [sink.topic(t, self.options.full_table_name) for t in sources]
        self.holder = holder_id(settings.node_id)
        self.epoch: int | None = None
        self.share = JobShare()  # a --follow node's share of the jobs
        self.idle = False  # after a step: no batch waits for any span
        self.watched = False  # a node's watch wakes it (`node/watch.py`): steps come when something changed
        self.leases: Leases | None = None  # the node's renewal of its leases (None: a thread of its own)
        self.looks: GroupCommit | None = None  # a --follow node's looks at its jobs' leases, read together
        self.takes: GroupCommit | None = None  # and its claims of those found free, written together
        self._resolved_at: float | None = None  # when the job's last resolved timestamp was written
        self._closes_at: Hlc | None = None  # the oldest version recorded and not cut: cut once it is closed
        self._cut_from: tuple[dict, dict] = ({}, {})  # the last cut's positions read, newest recorded after it
        # Wakes this node's spans: a batch cut, spans placed, the node's watch, the coordinator's turns over.
        self.cut = cut or threading.Event()
        self.wake = Wake()  # wakes the coordinator: a batch emitted here, the watch, the project
        self.steady: Steady | None = None  # ticked by `ticker` until something wakes it
        self.ticker = None  # a --follow node's ticker (`node/ticker.py`)
        self.stepping = threading.Lock()  # held by a step, or by the ticker's round while it cuts, takes, ticks
        # Held while the ticker's workers write the job's resolved timestamp: a step waits for it too, the
        # ticker's cuts and takes do not (a round's files took most of each second under load).
        self.resolving = threading.Lock()
        self._emits = threading.Lock()  # between a step's start or end and a batch said emitted (`batch_emitted`)
        self._in_step = False
        self._emitted_in_step = False
        self.error: BaseException | None = None  # what stopped the thread, if not the job
        self._reads: dict[str, tuple[float, int]] = {}  # per table: share of rows read, bytes of a read row
        self.wanted: Wanted | None = None  # this node's copy of the project, as its runner last took it
        self.rollout = rollout.RollOut(store, job.job_id, job.feed, settings.node_id, settings.liveness_ttl, log)
        self.history = HistoryWatch(job.feed, log)  # the job's headroom under its tables' retention

    def claim(self, share: bool = False) -> int | None:
        """The job's lease (its epoch), when it is free to this node. Sharing (a --follow node's coordinator
        thread), it leaves a free lease for a while to a peer holding fewer leases (`job_share`), then claims
        it if it is still free."""
        sharing = share and self.share.leaving(time.monotonic())
        mine = lease.Look(
            self.job_id,
            self.holder,
            self.settings.lease_ttl,
            self.settings.liveness_ttl,
            lease.Sharing(self.feed, self.options.execution_locality) if sharing else None,
        )
        claimed = lease.claim(self.store, mine, self.looks, self.takes)
        self.share.claimed(claimed, time.monotonic())
        return claimed.epoch

    def shed(self) -> bool:
        """Now and then (a --follow node's coordinator, between steps): hand the job to a peer holding fewer
        leases than this node (`lease.left_to_peer`), so that nodes started apart, or one started again, come to
        share the jobs. True once handed: this node stands by."""
        if not self.share.shed_due(time.monotonic()):
            return False
        standing = self.leases.standing if self.leases is not None else None
        wanted = self.options.execution_locality
        if standing is not None and not standing.may_shed(self.holder, self.feed, wanted, self.settings.liveness_ttl):
            return False
        with self.stepping, self.resolving:  # never beside a tick, whose write the hand would fence out
            to = lease.shed(
                self.store,
                self.job_id,
                self.holder,
                self.epoch,
                self.settings.lease_ttl,
                self.settings.liveness_ttl,
                lease.Sharing(self.feed, wanted),
            )
            if to is None:
                return False
            if self.ticker is not None:
                self.ticker.drop(self.job_id)
            self.steady, self.epoch = None, None
        self.log(
            f"{self.feed}: job {self.job_id} handed to {nodes.node_of(to)}, which coordinates fewer jobs",
            event="handed_over",
            feed=self.feed,
            job_id=self.job_id,
            node=nodes.node_of(to),
        )
        return True

    def release(self) -> None:
        # The ticker ticks it no more: a tick's write would be refused, the lease gone.
        with self.stepping, self.resolving:
            if self.ticker is not None:
                self.ticker.drop(self.job_id)
            self.steady = None
        if self.epoch is not None:
            with self.store.transaction() as conn:
                jobs.release_lease(conn, self.job_id, self.epoch)
            self.epoch = None

    def heartbeat(self) -> Heartbeat:
        return Heartbeat(
            self.store, self.job_id, self.holder, self.epoch, self.settings.lease_ttl, self.leases, self.wake
        )

    # -- one step ------------------------------------------------------------------------------------

    def step(self) -> bool:
        """Place spans, move the high-water mark over what they emitted, cut batches ahead; True once the
        job is no longer running (finished, failed or paused by this step)."""
        with self.stepping, self.resolving:  # never beside a tick of the node's ticker
            if self.ticker is not None:
                self.ticker.drop(self.job_id)
            with self._emits:
                self.steady, self._in_step, self._emitted_in_step = None, True, False
            try:
                return self._step()
            finally:
                with self._emits:
                    self._in_step = False
                    emitted = self._emitted_in_step
                if emitted:  # said now the step is over: the ticker takes it, or the next step does
                    self.batch_emitted()

    def _step(self) -> bool:
        wakes = self.wake.count
        with self.store.reading() as conn:
            job = jobs.get_job(conn, self.job_id)
        if self.wanted is not None:
            job, self.declared = self.retrying(
                "taking the project's change", lambda: self.rollout.step(job, self.wanted, self.epoch)
            )
        definition = definition_of(job)
        self.options = definition.options  # changed in place by the coordinator
        table_change.check_sources(definition, self.sources)
        self.tables = list(definition.tables)
        frontier = self._frontier(job)
        try:
            if frontier.advance():
                return True
            if frontier.marks is not None:  # batches taken: the job's row moved on
                with self.store.reading() as conn:
                    job = jobs.get_job(conn, self.job_id)
            waiting, time_only = self.retrying("planning", lambda: self._cut(job))  # places the spans too
        except Exception as exc:
            failure = self.retrying.classify(exc)
            if not failure.ends_job:  # a store error, a lost lease, a stopped job: no job is failed for it
                raise
            frontier.fail(failure.cause, outage=failure.kind == ErrorKind.OUTAGE)
            return True
        self.history.look(self.store, job, self.sources)
        said = self.report.resolved
        # No version is left to cut, and what waits the ticker can take: a watched job's ticker moves time on
        # from here. Batches just taken moved the mark already: its next tick moves it on, sparing a second
        # checkpoint now. A job with batches waiting becomes steady too: under load, when every step finds
        # the next commit's batch waiting, it would otherwise never leave its own steps again.
        steady = (
            self._closes_at is None
            and self.watched
            and self.ticker is not None
            and (not waiting or self._ticker_takes(job, waiting))
        )
        if time_only is not None and not (steady and frontier.marks is not None):  # only time moves on
            if frontier.checkpoint(time_only):
                return True
        if steady:
            marks = frontier.marks or jobs.Marks(job.high_water, job.resolved, job.resolved_at)
            first = self._first_tick(marks)
            self.steady = Steady(wakes, look_again(), job, marks, first, *self._cut_from, waiting=waiting)
            self.ticker.hold(self)
        self.idle = not waiting
        self._resolved_at = time.time() if self.report.resolved != said else job.resolved_at
        return False

    def _frontier(self, job: jobs.Job, retrying=None) -> Frontier:
        return Frontier(
            self.store,
            job,
            self.epoch,
            self.options,
            self.sink,
            self.topics,
            self.end_time,
            self.report,
            self.log,
            retrying or self.retrying,
            self.sources,
            self.settings.knobs,
        )

    def nap(self) -> float:
        """How long to wait before the next step: a poll interval, unless the node's watch wakes the job. A
        watched job steps when woken (a new version of a table, a batch emitted, the job or the nodes
        changed) or when time alone moves it on: a version recorded is old enough to be cut, a resolved
        timestamp is due (once no batch waits), the job ends; and within `MAX_NAP` whatever happens. A steady
        one ticks when its resolved timestamp or its checkpoint (`min_checkpoint_frequency`) is due, and
        looks again within `LOOK_AGAIN`; so does a coordinator standing by."""
        poll = self.settings.poll_interval
        if not self.watched:
            return poll
        if self.epoch is None:  # standing by: woken when the lease's holder dies or the lease expires
            left = self.share.claim_in(time.monotonic())  # a free lease left to a peer: claimed if still free
            return LOOK_AGAIN if left is None else max(left, poll)
        if self.steady is not None:  # the node's ticker ticks it: it looks again, unless woken before, and
            now = time.monotonic()  # looks at handing the job over meanwhile (`shed`), without a step
            nap = min(self.steady.look_again_at - now, self.share.shed_in(now))
            if self.end_time is not None:  # the full step ends the job once the closed timestamp passes its end
                nap = min(nap, max(self.end_time.wall / 1e9 + self.settings.closed_lag - time.time(), poll))
            return max(nap, 0.0)
        now, nap = time.time(), MAX_NAP
        if self._closes_at is not None:
            nap = min(nap, self._closes_at.wall / 1e9 + self.settings.closed_lag - now)
        every = resolved.interval(self.options)
        if every is not None and self.idle:  # while a batch waits, the mark moves once it is emitted: a wake
            nap = min(nap, every - (now - self._resolved_at) if self._resolved_at is not None else poll)
        if self.end_time is not None:
            nap = min(nap, self.end_time.wall / 1e9 - now)
        return max(nap, poll)

    def _cut(self, job: jobs.Job) -> tuple[tuple[batch_intents.Intent, ...], Hlc | None]:
        """Cut scans and batches until `batches_ahead` wait: what the store and the tables' logs say is read
        first, what to cut is decided without I/O (`coordinator/cut.py`), and it is all written, with the
        spans' places, in one transaction. Returns the batches waiting (those cut here included), and the
        target of a time-only advance (nothing waits and no change is due)."""
        self._keys_of(definition_of(job))
        with self.store.reading() as conn:
            pending = batch_intents.pending_intents(conn, job.job_id)
            positions = {t: p for t, p in checkpoints.positions(conn, job.job_id).items() if t in self.tables}
            last = {t: event_times.last_recorded(conn, job.job_id, t) for t in self.tables}
        self._cut_from = (positions, last)
        recorded_ts = [r.event_ts for r in last.values() if r]
        scanning = self.options.scans and not job.initial_scan_done
        initial = scanning and not any(i.kind == IntentKind.SCAN for i in pending)
        scanned = cut.scans(
            cut.ScanFacts(
                self.tables,
                {t: p[0] for t, p in positions.items()},
                initial,
                scanning and not initial,
                definition_of(job).unscanned(),
                job.start,
                max([job.high_water, job.start, *recorded_ts, *(i.target for i in pending)]),
                self._closed(),
            )
        )
        scanned_regions = (  # a regional-by-row table's regions at the version the initial scan reads
            {
                t: self.sources[t].values(column, positions[t][0])
                for t, column in self.regional.items()
                if t in positions and positions[t][0] >= 0
            }
            if initial
            else {}
        )
        # A table is cut (and its versions stamped) only after its scan: nothing of it sorts below the scan.
        tables = [t for t in self.tables if t not in scanned.waits]
        after = {t: p[0] for t, p in positions.items()}
        floor = max(job.high_water, job.start)
        for i in pending:
            if i.kind == IntentKind.CHANGES:
                after.update({t: b for t, (_, b) in i.ranges.items()})
            floor = max(floor, i.target)
        floor = max([floor, *(s.target for s in scanned.scans)])
        waiting = len(pending) + len(scanned.scans)
        if (
            self.options.initial_scan == InitialScan.ONLY
            or waiting >= self.settings.batches_ahead
            or any(SchemaChangeAction.STOP in i.schema_changes.values() for i in pending)
        ):  # only a scan; or enough cut ahead; or the job stops at a change cut: nothing after it is
            self._closes_at = None
            return (*pending, *self._apply(job, positions, scanned.scans, scanned_regions)), None
        fresh = self._new_versions(job, tables, positions, floor, last)
        found = {}
        for table, column in self.regional.items():
            versions = [r.version for r in fresh if r.table == table]
            if versions:
                found[table] = self.sources[table].values(column, max(versions), min(versions) - 1)
        schema_changes = {
            (t, v): schema_change.action(self._log(t).schema_change(v), self.options, self.pushdown[t].columns)
            for t in tables
            for v in self._log(t).schema_changes(after[t], self.latest[t])
        }
        rekey = self._key_change(job, tables, after)
        regions = set()
        if rekey is not None and not waiting and rekey.after.region_column:  # its batch may be cut now
            column, source = rekey.after.region_column, self.sources[rekey.table]
            regions = source.values(column, rekey.version) | source.values(
                column, self.latest[rekey.table], rekey.version - 1
            )
        with self.store.reading() as conn:  # versions recorded by an earlier step and not yet cut
            recorded = [r for t in tables for r in event_times.recorded_after(conn, job.job_id, t, after[t])]
        decided = cut.decide(
            cut.CutFacts(
                after,
                floor,
                waiting,
                [*recorded, *fresh],
                self._closed(),
                self.settings.batches_ahead,
                self.options.batch_rows,
                self.options.batch_bytes,
                self.end_time,
                schema_changes,
                rekey,
                self.options.schema_change_policy.action,
            )
        )
        uncut = not (waiting or decided.batches) and decided.time_only is None  # versions not closed yet
        self._closes_at = min((r.event_ts for r in [*recorded, *fresh]), default=None) if uncut else None
        cut_now = self._apply(job, positions, scanned.scans, scanned_regions, fresh, found, decided.batches, regions)
        self._cut_from = (positions, {**last, **{r.table: r for r in fresh}})  # in version order: the newest stays
        if decided.blocked is not None:  # everything before the change is emitted
            self._cannot_go_past(job, *decided.blocked)
        return (*pending, *cut_now), decided.time_only

    def _closed(self, now_ns: int | None = None) -> Hlc:
        """No version not yet seen gets an event timestamp at or below it."""
        return Hlc((now_ns or time.time_ns()) - int(self.settings.closed_lag * 1e9))

    def _apply(
        self,
        job: jobs.Job,
        positions: dict[str, tuple[int, int]],
        scans: tuple[cut.Scan, ...],
        scanned_regions: dict[str, set],
        fresh: list[event_times.Recorded] = (),
        found: dict[str, set] | None = None,
        batches: tuple[cut.Cut, ...] = (),
        regions: set = frozenset(),
    ) -> list[batch_intents.Intent]:
        """What the step decided, in one transaction fenced by the lease: the scans (after spans for the
        regions the initial scan finds), the new versions' event timestamps, spans for regions they bring,
        the batches (and a key change's new spans), and every span on its node before any node polls for the
        batches. A region's spans start after the newest batch cut when they are added: none of those holds
        its rows. Returns the scans and batches it cut."""
        if not (scans or fresh or batches or scanned_regions):
            with self.store.reading() as conn:
                if self._settled(conn):
                    return []
        added, cut_now = [], []
        with self.store.transaction() as conn:
            self._add_regions(conn, job, scanned_regions, positions)
            definition = was = definition_of(jobs.get_job(conn, job.job_id))
            for scan in scans:
                intent = fenced.cut(conn, job.job_id, self.epoch, IntentKind.SCAN, scan.target, scan.ranges)
                cut_now.append(intent)
                if scan.added is None:  # tables added before the initial scan: scanned with the others
                    for change in definition.unscanned():
                        definition = definition.with_scan(change.table, scan.target)
                else:
                    definition = definition.with_scan(scan.added.table, scan.target)
                    added.append((scan.added, intent))
            if definition != was:
                jobs.set_definition(conn, job.job_id, self.epoch, definition)
            event_times.record(conn, {job.job_id: list(fresh)})
            self._add_regions(conn, job, found or {}, positions)
            for batch in batches:
                intent = fenced.cut(
                    conn, job.job_id, self.epoch, IntentKind.CHANGES, batch.target, batch.ranges, batch.schema_changes
                )
                cut_now.append(intent)
                if batch.rekey is not None:
                    self._change_key(conn, batch.rekey, intent, positions[batch.rekey.table][1], regions)
            moved = self._place_in(conn, job)  # new spans on their nodes before they poll for the batch
        self._said_placed(moved)
        for change, intent in added:
            self.log(
                f"{self.feed}: {change.table} added: scanned at version {change.version} in batch "
                f"{intent.batch_seq}, at {intent.target}",
                event="table_scan",
                feed=self.feed,
                table=change.table,
                batch=intent.batch_seq,
            )
        if scans or batches:
            self.settings.knobs.reached("after-intent")
            self.cut.set()
        return cut_now

    def _cannot_go_past(self, job: jobs.Job, table: str, version: int) -> None:
        change = self.sources[table].schema_change(version)
        named = ", ".join(
            f"{c} ({self.column_sites.get(c.lower(), 'the query')})"
            for c in schema_change.read_dropped(change, self.pushdown[table].columns)
        )
        with self.store.reading() as conn:
            high_water = jobs.get_job(conn, self.job_id).high_water
        raise SourceError(
            f"{change.describe()}: the query of feed {self.feed} reads {named}; every change before "
            f"it is emitted. Change the query, then start a new job from here: feedctl run "
            f"--new-job -s {self.feed} --cursor '{high_water}'"
        )
