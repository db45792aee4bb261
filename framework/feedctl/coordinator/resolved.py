"""Resolved timestamps: when one is due, and writing it to the sink after the checkpoint it reports."""

from __future__ import annotations

from feedctl.encoding import columnar
from feedctl.encoding.json import resolved_message
from feedctl.sinks import kafka, naming, webhook
from feedctl.sinks.cloudstorage import CloudStorage
from feedctl.units import Hlc, parse_duration


def interval(options: dict) -> float | None:
    """Seconds between resolved timestamps, or None when the feed emits none. As in CockroachDB, never more
    often than `min_checkpoint_frequency` either."""
    resolved = options.get("resolved")
    if resolved is None or resolved is False:
        return None
    every = 0.0 if resolved is True else parse_duration(resolved)
    return max(every, parse_duration(options["min_checkpoint_frequency"]))


def due(options: dict, high_water: Hlc, last_resolved: Hlc, last_at: float | None, now: float) -> bool:
    every = interval(options)
    if every is None or high_water <= last_resolved or high_water.wall == 0:
        return False
    return last_at is None or now - last_at >= every


def write(sink_kind: str, sink_uri: str, project_root: str, sink_options: dict, options: dict, resolved: Hlc,
          topics: list[str]) -> str:
    """Tell the sink's consumers that everything at or below `resolved` has been emitted; returns where.

    Cloud storage: `<partition>/<ts33>.RESOLVED` holding `{"resolved":"<ns>.<logical>"}` (Parquet for a
    Parquet feed), written once: a repeat after a crash finds the same bytes there; a second coordinator
    cannot write it too.
    Kafka: that message, with a null key, to every partition of every topic of the feed.
    Webhook: that message as a request of its own."""
    message = resolved_message(str(resolved), options["envelope"])
    if sink_kind == "kafka":
        kafka.write_resolved(sink_uri, sink_options, sorted(set(topics)), message)
        return f"{len(set(topics))} topics"
    if sink_kind == "webhook":
        webhook.write_resolved(sink_uri, sink_options, message)
        return "webhook"
    if sink_kind == "null":
        return "null sink"
    sink = CloudStorage(sink_uri, project_root, sink_options["storage_options"])
    name = naming.resolved_file(resolved, sink_options["partition_format"])
    # A Parquet feed's consumers read Parquet: one DECIMAL column `__crdb__resolved`, as CockroachDB writes.
    body = columnar.resolved_parquet(str(resolved)) if options["format"] == "parquet" else message.encode()
    sink.put_once(name, body)
    return name
