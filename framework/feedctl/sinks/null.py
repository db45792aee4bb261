"""The null sink (`null://`): takes every message and keeps none, so a feed's full cost can be measured
without a sink's."""

from __future__ import annotations

from feedctl.sinks.sink import Sink, SinkKind, VersionIn
from feedctl.sinks.stream import StreamWriter
from feedctl.units import Hlc

KIND = SinkKind(
    "null", {"null": None}, frozenset(), frozenset({"json", "csv", "parquet", "avro"}), version_in=VersionIn.NOWHERE
)


class NullSink(Sink):
    KIND = KIND
    Writer = StreamWriter  # encodes every message, sends none

    def write_resolved(self, resolved: Hlc, fmt: str, envelope: str, topics: list[str]) -> str:
        return "null sink"

    def resolved_is_local(self) -> bool:
        return True
