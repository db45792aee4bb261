"""A job's new versions on the coordinator (`NewVersions`, a part of `JobCoordinator`, whose state it shares): each
table's newest version as the node's watch found it, the commits after the job's last one read through the
node's shared log of the table (`source/shared_log.py`) or the job's own handle, and each stamped with its event
timestamp above the last batch cut."""

from __future__ import annotations

from feedctl.coordinator import event_ts
from feedctl.coordinator.steady import MAX_NAP
from feedctl.source.delta import DeltaSource
from feedctl.source.shared_log import FeedLog
from feedctl.state import event_times, jobs
from feedctl.units import Hlc


class NewVersions:
    def _new_versions(
        self, job: jobs.Job, tables: list[str], positions, floor: Hlc, last: dict[str, event_times.Recorded | None]
    ) -> list[event_times.Recorded]:
        """Event timestamps for versions of `tables` not yet recorded (`last`: each table's newest recorded, as
        the step read it), each above `floor` (the last batch cut). Delta is read outside any state
        transaction; `event_times.record` then refuses what was recorded meanwhile."""
        out = []
        for table in tables:
            source = self.sources[table]
            after = last[table].version if last[table] else positions[table][0]
            latest = self.latest[table] = self._newest(source)
            if latest <= after:
                continue
            commits = self._log(table).commits(after, latest)
            stamps = event_ts.assign(
                [c.commit_ns for c in commits], last[table].event_ts if last[table] else None, floor
            )
            if table not in self._reads:
                pushdown = self.pushdown[table]
                self._reads[table] = source.read_estimate(pushdown.columns, pushdown.scan_filter)
            share, row_bytes = self._reads[table]
            for c, ts in zip(commits, stamps):
                rows = max(1, round(c.rows * share))
                out.append(event_times.Recorded(table, c.version, c.commit_ns, ts, rows, rows * row_bytes))
        return out

    def _log(self, table: str) -> DeltaSource | FeedLog:
        """Where the job reads `table`'s commits and schema changes: through the node's handle when the node's
        watch has one, else its own."""
        source = self.sources[table]
        shared = self.logs(source) if self.logs is not None else None
        return shared.of(source) if shared is not None else source

    def _newest(self, source: DeltaSource) -> int:
        """The table's newest version: as the node's watch found it, if it looked within `MAX_NAP` (a wake
        that much late is a latency the watched job takes anyway), else read from its log. A version seen
        late is recorded late, stamped above the batches cut before it (`event_ts`): none is missed."""
        seen = self.newest(source, MAX_NAP) if self.newest is not None else None
        return seen if seen is not None else source.latest_version()
