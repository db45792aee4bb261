"""Where a job's spans are, on the coordinator (`SpanPlacing`, a part of `JobCoordinator`, whose state it
shares): placed on the live nodes working the feed within its execution locality (`span_owner` decides), a
dropped table's retired once no batch holding it waits, a regional-by-row table's spans added as regions appear.
Each in the caller's transaction, fenced by the lease; a step whose placing would write nothing takes no write
lock (`_settled`)."""

from __future__ import annotations

import time

from feedctl.coordinator import fenced, locality, span_owner
from feedctl.job.definition import definition_of
from feedctl.source.spans import Regions
from feedctl.state import batch_intents, checkpoints, jobs, nodes, spans


class SpanPlacing:
    """The placing of a job's spans, on its `JobCoordinator`."""

    def _place_in(self, conn, job: jobs.Job) -> list[span_owner.Move]:
        """Place the job's spans on the live nodes working the feed, in the transaction `conn` (which may
        have cut batches, added spans for regions, or laid out a table's spans for a new key)."""
        moved = []
        fenced.hold(conn, self.job_id, self.epoch)
        self._keys_of(definition_of(jobs.get_job(conn, self.job_id)))
        counts = {
            t: n
            for t, (_, n) in checkpoints.positions(conn, self.job_id).items()
            if t in self.tables and t not in self.regional
        }
        self._retire_dropped(conn)
        spans.ensure(
            conn,
            self.job_id,
            counts,
            batch_intents.last_done(conn, self.job_id),
            job.high_water,
            {t: h for t, h in self.homes.items() if t not in self.regional},
        )
        for move in self._moves(conn, spans.of_job(conn, self.job_id)):
            if not move.now:
                spans.hand_over(conn, self.job_id, move.span, move.to, move.reason, move.cause)
            elif spans.assign(conn, self.job_id, move.span, move.to, move.reason, move.cause):
                moved.append(move)
        return moved

    def _moves(self, conn, every: list[spans.Span]) -> list[span_owner.Move]:
        """Where the job's spans go now, on the live nodes working the feed (this one emits too)."""
        working, last_live = nodes.working(conn, self.feed, self.settings.liveness_ttl)
        working[self.settings.node_id] = self.settings.locality
        wanted = self.options.execution_locality
        eligible = {n: where for n, where in working.items() if not wanted or locality.matches(wanted, where)}
        return list(
            span_owner.place(
                every,
                eligible,
                last_live,
                self.settings.span_grace,
                time.time(),
                spans.held_elsewhere(conn, self.job_id),
                self.options.range_distribution_strategy,
            )
        )

    def _settled(self, conn) -> bool:
        """Whether placing the spans would write nothing (read from a snapshot): every span there, at its
        table's home, none of a dropped table, and none to move. A step with nothing else to write then takes
        no write lock."""
        every = spans.of_job(conn, self.job_id)
        have = {(s.table, s.span): s.home for s in every}
        counts = checkpoints.positions(conn, self.job_id)
        plain = [t for t in self.tables if t not in self.regional]
        return (
            all((t, s) in have for t in plain if t in counts for s in range(counts[t][1]))
            and all(home == self.homes[t] for (t, _), home in have.items() if t in plain and t in self.homes)
            and {t for t, _ in have} <= set(self.tables)
            and not self._moves(conn, every)
        )

    def _said_placed(self, moved: list[span_owner.Move]) -> None:
        if moved:
            self.cut.set()  # spans placed on this node emit at once
            self.log(
                f"{self.feed}: spans placed: {span_owner.describe(moved)}",
                event="spans_placed",
                feed=self.feed,
                job_id=self.job_id,
                moves=[f"{m.span.table}/{m.span.span} → {m.to} ({m.reason}: {m.cause})" for m in moved],
            )

    def _retire_dropped(self, conn) -> None:
        """The spans of a table dropped from the job go once no batch holding it waits."""
        pending = batch_intents.pending_intents(conn, self.job_id)
        held = {s.table for s in spans.of_job(conn, self.job_id)}
        for table in held - set(self.tables):
            if not any(table in i.ranges for i in pending):
                spans.retire(conn, self.job_id, table)

    def _add_regions(self, conn, job: jobs.Job, found: dict[str, set], positions) -> None:
        """Spans for regions first seen in a regional-by-row table, before any batch holding their rows is
        cut, starting after the newest batch cut (none holds their rows)."""
        if not found:
            return
        last = batch_intents.last_cut(conn, self.job_id)
        seq, frontier = last if last is not None else (0, job.high_water)
        added = []
        for table, values in sorted(found.items()):
            homes = [Regions.home(v) for v in sorted(values, key=lambda v: (v is None, str(v)))]
            added += [
                f"{table} {h or 'no region'}"
                for h in spans.add_regions(conn, self.job_id, table, homes, positions[table][1], seq, frontier)
            ]
        if added:
            self.log(
                f"{self.feed}: spans added for {', '.join(added)}",
                event="regions_added",
                feed=self.feed,
                job_id=self.job_id,
                regions=added,
            )
