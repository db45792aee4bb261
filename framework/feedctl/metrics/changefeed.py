"""A node's changefeed metrics, named as CockroachDB's (its `changefeed.emitted_messages` is
`changefeed_emitted_messages` here; counters carry Prometheus' `_total` suffix), labeled with the feed's
`metrics_label` as `scope` (CockroachDB's label; `default` for feeds without one) and with the node.

Counters grow by what a batch wrote, as its Spark tasks return it with their results: never per message.
The gauges are read from the state store when scraped (`node_gauges`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from feedctl.options import Options

REGISTRY = CollectorRegistry(auto_describe=True)
LABELS = ("scope", "node")

EMITTED_MESSAGES = Counter(
    "changefeed_emitted_messages", "Messages emitted to sinks, acknowledged by them.", LABELS, registry=REGISTRY
)
EMITTED_BYTES = Counter(
    "changefeed_emitted_bytes", "Bytes of the messages emitted to sinks.", LABELS, registry=REGISTRY
)
FLUSHED_BYTES = Counter(
    "changefeed_flushed_bytes",
    "Bytes written to sinks: files as stored (after compression), requests' and records' message bytes.",
    LABELS,
    registry=REGISTRY,
)
ERROR_RETRIES = Counter(
    "changefeed_error_retries",
    "Steps retried after an error: a batch's writes to its sink, "
    "reads of its tables, its Spark work, a resolved timestamp's write.",
    LABELS,
    registry=REGISTRY,
)
COMMIT_LATENCY = Histogram(
    "changefeed_commit_latency",
    "Seconds from the commit of a batch's oldest change to the sink's "
    "acknowledgement of the batch (batches of changes; not scans or backfills).",
    LABELS,
    buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600),
    registry=REGISTRY,
)


def scope(options: Options) -> str:
    return options.metrics_label or "default"


def batch_emitted(
    options: Options, node: str, messages: int, emitted_bytes: int, flushed_bytes: int, latency_seconds: float | None
) -> None:
    labels = (scope(options), node)
    EMITTED_MESSAGES.labels(*labels).inc(messages)
    EMITTED_BYTES.labels(*labels).inc(emitted_bytes)
    FLUSHED_BYTES.labels(*labels).inc(flushed_bytes)
    if latency_seconds is not None:
        COMMIT_LATENCY.labels(*labels).observe(max(latency_seconds, 0.0))


def retried(options: Options, node: str) -> None:
    ERROR_RETRIES.labels(scope(options), node).inc()
