"""The gauges of a node's feeds, read from the state store at each scrape: whether their jobs run, how far
their checkpoints are behind now, which are in a scan or backfill, their lagging spans and the spans this
node holds. Per `scope` (the feeds' `metrics_label`) and node, as the counters of `changefeed`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from feedctl.job.definition import definition_of
from feedctl.metrics.changefeed import LABELS, scope
from feedctl.state import jobs, nodes, spans
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore


@dataclass(frozen=True)
class FeedOnNode:
    job_id: int | None  # None until the feed's job is found or created
    backfilling: bool  # emitting a scan or a backfill now
    headroom: float | None = None  # its job's least history headroom, where this node coordinates it


_GAUGES = {
    "running": "Feeds whose job is running, on this node.",
    "max_behind_nanos": "The most a running job's persisted checkpoint (high-water mark) is behind now.",
    "checkpoint_progress": "The earliest high-water mark of the running jobs, in nanoseconds since the epoch.",
    "backfill_count": "Feeds emitting an initial scan or a backfill on this node now.",
    "lagging_spans": "Spans more than 3 minutes behind now, or held by a node that is not live (reported by "
    "the node coordinating the job).",
    "spans_held": "Spans of the feeds' jobs this node holds.",
}
_HEADROOM = (
    "changefeed_history_headroom_seconds",
    "The least time, over the running jobs this node coordinates and their tables, until a table's retention "
    "may remove history a job still needs (negative: it may be gone).",
)


def _begun() -> CounterMetricFamily:
    return CounterMetricFamily(
        "feedctl_state_transactions",
        "Transactions this node began on the state store, by kind: write, or read (a snapshot).",
        labels=("kind", "node"),
    )


class NodeGauges(Collector):
    def __init__(self, store: StateStore, node_id: str, feeds: Callable[[], list[FeedOnNode]]):
        self.store, self.node_id, self.feeds = store, node_id, feeds

    def describe(self):
        return [
            _begun(),
            *(GaugeMetricFamily(f"changefeed_{name}", text, labels=LABELS) for name, text in _GAUGES.items()),
            GaugeMetricFamily(*_HEADROOM, labels=LABELS),
        ]

    def collect(self):
        begun = _begun()
        for kind, count in sorted(self.store.begun.items()):
            begun.add_metric([kind, self.node_id], count)
        yield begun
        try:
            values = self._read()
        except Exception:  # the store away: the counters are still worth a scrape
            return
        for name, text in _GAUGES.items():
            family = GaugeMetricFamily(f"changefeed_{name}", text, labels=LABELS)
            for at, value in sorted(values[name].items()):
                family.add_metric([at, self.node_id], value)
            yield family
        headroom = GaugeMetricFamily(*_HEADROOM, labels=LABELS)
        for at, value in sorted(values[_HEADROOM[0]].items()):
            headroom.add_metric([at, self.node_id], value)
        yield headroom

    def _read(self) -> dict[str, dict[str, float]]:
        values: dict[str, dict[str, float]] = {name: {} for name in (*_GAUGES, _HEADROOM[0])}
        now = time.time_ns()
        # On the node's own connections: behind a thousand feeds' threads in the pool, a scrape waited past
        # its timeout.
        with self.store.reading(node=True) as conn:
            live = {nodes.node_of(h) for h in nodes.live_holders(conn)}
            feeds = [f for f in self.feeds() if f.job_id is not None]
            found = jobs.get_jobs(conn, [f.job_id for f in feeds])
            held = spans.of_jobs(conn, [j.job_id for j in found.values() if j.status == JobStatus.RUNNING])
            for feed in feeds:
                job = found.get(feed.job_id)
                if job is None:
                    continue
                at = scope(definition_of(job).options)
                for name in _GAUGES:
                    values[name].setdefault(at, 0)
                if job.status != JobStatus.RUNNING:
                    continue
                rows = held[job.job_id]
                high_water = max(job.high_water, job.start)
                values["running"][at] += 1
                values["max_behind_nanos"][at] = max(values["max_behind_nanos"][at], now - high_water.wall)
                earliest = values["checkpoint_progress"][at]
                values["checkpoint_progress"][at] = min(earliest, high_water.wall) if earliest else high_water.wall
                values["backfill_count"][at] += feed.backfilling
                if nodes.node_of(job.coordinator) == self.node_id:
                    values["lagging_spans"][at] += len(spans.lagging(rows, job.high_water, live, now / 1e9))
                values["spans_held"][at] += sum(s.node == self.node_id for s in rows)
                if feed.headroom is not None:  # only where a value is known: none is not 0 s
                    least = values[_HEADROOM[0]]
                    least[at] = min(least.get(at, feed.headroom), feed.headroom)
        return values
