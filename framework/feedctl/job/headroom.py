"""A job's history headroom on each of its tables (`source/retention.py`): the oldest version it still needs
(the one after the last it emitted), when that version was committed, and how long until the table's
retention may take its files or its commit."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from feedctl.diagnostics import first_line
from feedctl.job.definition import definition_of
from feedctl.source.delta import DeltaSource, of_table
from feedctl.source.retention import Retention
from feedctl.state import checkpoints, event_times, jobs

WARN_SHARE = 0.25  # a job is warned of when less than this share of the table's retention is left
# Seconds between a coordinating node's looks at a job's headroom: retentions are days, and a node may
# coordinate a thousand jobs.
LOOK_EVERY = 300.0


@dataclass(frozen=True)
class Headroom:
    table: str
    needed_version: int  # the oldest version the job still needs
    needed_commit_ns: int | None  # its commit (None: not committed yet)
    retention: Retention
    seconds: float  # until its history may be gone (negative: it may be gone already)

    @property
    def low(self) -> bool:
        return self.seconds < WARN_SHARE * self.retention.shortest

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "needed_version": self.needed_version,
            "headroom_seconds": round(self.seconds, 1),
            "retention_seconds": self.retention.shortest,
            "low": self.low,
        }


def needed_versions(conn, job: jobs.Job) -> dict[str, tuple[int, int | None]]:
    """table -> (the oldest version the job still needs, its commit time if the job recorded it)."""
    out = {}
    for table, (emitted, _) in checkpoints.positions(conn, job.job_id).items():
        if table not in definition_of(job).tables:
            continue
        recorded = event_times.recorded_after(conn, job.job_id, table, emitted, emitted + 1)
        out[table] = (emitted + 1, recorded[0].commit_ns if recorded else None)
    return out


def headroom(source: DeltaSource, needed: int, commit_ns: int | None, now_ns: int | None = None) -> Headroom:
    """The headroom of a job needing `needed` of `source` (committed at `commit_ns` when the job recorded it;
    else read from the log, if the version exists yet)."""
    latest, properties = source.newest_properties()
    if commit_ns is None and needed <= latest:
        commit_ns = source.commits(needed - 1, needed)[0].commit_ns
    retention = Retention.of(properties)
    now_ns = time.time_ns() if now_ns is None else now_ns
    return Headroom(source.name, needed, commit_ns, retention, retention.headroom(commit_ns, now_ns))


class Headrooms:
    """The headrooms of many jobs on the tables `project.yml` declares, each table opened once."""

    def __init__(self, tables: dict):
        self.tables = tables
        self._sources: dict[str, DeltaSource] = {}
        self._said: dict[tuple, dict] = {}

    def of(self, conn, job: jobs.Job) -> list[dict]:
        """Each of the job's tables' headroom (`Headroom.to_json`), or why it cannot be said."""
        out = []
        for table, (version, commit_ns) in sorted(needed_versions(conn, job).items()):
            if table not in self.tables:
                continue
            key = (table, version, commit_ns)
            if key not in self._said:
                try:
                    source = self._sources.setdefault(table, of_table(table, self.tables[table]))
                    self._said[key] = headroom(source, version, commit_ns).to_json()
                except Exception as exc:  # a table that cannot be read now: said, the others go on
                    self._said[key] = {"table": table, "needed_version": version, "error": first_line(exc)}
            out.append(self._said[key])
        return out


class HistoryWatch:
    """A coordinator's look at its job's headroom, once every `LOOK_EVERY`: kept for the node's metric
    (`changefeed_history_headroom_seconds`), and a warning event when a table's turns low."""

    def __init__(self, feed: str, log):
        self.feed, self.log = feed, log
        self.found: dict[str, Headroom] = {}
        # The first look within LOOK_EVERY, at a time of its own: a node starting a thousand jobs does not
        # look at them all at once.
        self._looked: float | None = time.monotonic() - random.uniform(0, LOOK_EVERY)

    def look(self, store, job: jobs.Job, sources: dict[str, DeltaSource]) -> None:
        now = time.monotonic()
        if self._looked is not None and now - self._looked < LOOK_EVERY:
            return
        self._looked = now
        with store.reading() as conn:
            needed = needed_versions(conn, job)
        found = {}
        for table, (version, commit_ns) in needed.items():
            if table not in sources:
                continue
            try:
                found[table] = headroom(sources[table], version, commit_ns)
            except Exception:  # a table that cannot be read: the job's own reads say why, and retry
                continue
            was = self.found.get(table)
            h = found[table]
            if h.low and (was is None or not was.low):
                self.log(
                    f"{self.feed}: the history of {table} from version {h.needed_version} on may be vacuumed "
                    f"in {h.seconds / 3600:.1f} h (its retention: {h.retention.shortest / 3600:.0f} h); the "
                    f"job is that far behind. Catch it up, or keep the history: feedctl retention {table}",
                    event="history_headroom_low",
                    feed=self.feed,
                    job_id=job.job_id,
                    table=table,
                    needed_version=h.needed_version,
                    headroom_seconds=round(h.seconds, 1),
                )
        self.found = found

    def least(self) -> float | None:
        """The least headroom over the job's tables, as last looked at."""
        return min((h.seconds for h in self.found.values()), default=None)
