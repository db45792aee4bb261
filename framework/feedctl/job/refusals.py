"""What a feed may declare but a run cannot do yet: refused with a reason, never silently ignored."""

from __future__ import annotations

from feedctl.options import Envelope, Format, Options
from feedctl.sinks.sink import SinkKind


def not_runnable(o: Options, sink: SinkKind, sink_options: dict) -> str | None:
    """Why a feed with options `o` into a sink of kind `sink` cannot run, or None."""
    if o.format not in sink.formats:
        return f"format: {o.format} is written to cloud storage sinks only; use format: json"
    if o.format == Format.AVRO and o.envelope != Envelope.WRAPPED:
        return "format: avro is written with envelope: wrapped only"
    if o.format == Format.AVRO and sink_options.get("compression") == "zstd":
        return "format: avro files compress with gzip (deflate) only"
    if o.envelope == Envelope.ENRICHED:
        return "envelope: enriched cannot be run yet"
    return None
