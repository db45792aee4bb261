"""Where a feed's contract version emits. Version 1 emits into its sink as the sink file gives it; a later
version into a location of its own beside it (a `v2/` folder, `<topic>_v2`), so that consumers of the old
version read on undisturbed while its job runs on, until canceled, and consumers of the new one start on a
location that holds only its messages. Each kind of sink says where (`SinkKind.version_in`)."""

from __future__ import annotations

from dataclasses import replace

from feedctl.project.model import SinkDef
from feedctl.sinks.registry import kind_of
from feedctl.sinks.sink import VersionIn

TOPIC_SUFFIX = "topic_suffix"  # the sink option a version's topics end with (`naming.topic_name`); never in a
# sink file


def at_version(sink: SinkDef, version: int) -> SinkDef:
    """`sink` as a feed's `version` emits into it."""
    uri, options = located(sink.uri, sink.options, version)
    uri_display, options_display = located(sink.uri_display, sink.options_display, version)
    return replace(sink, uri=uri, options=options, uri_display=uri_display, options_display=options_display)


def located(uri: str, options: dict, version: int) -> tuple[str, dict]:
    """A sink's URI and options as a feed's `version` emits into it (a redacted URI: the same)."""
    kind = kind_of(uri)
    if version == 1 or kind is None or kind.version_in == VersionIn.NOWHERE:
        return uri, options
    if kind.version_in == VersionIn.TOPIC:
        return uri, {**options, TOPIC_SUFFIX: f"_v{version}"}
    return _in_path(uri, version), options


def _in_path(uri: str, version: int) -> str:
    """`file://out/orders` → `file://out/orders/v2`; the query string (a sink's parameters) kept after it."""
    base, sep, query = uri.partition("?")
    return f"{base.rstrip('/')}/v{version}{sep}{query}"
