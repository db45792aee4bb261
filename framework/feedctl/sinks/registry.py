"""The one place that knows every kind of sink. A new sink is a module of this folder (a `Sink`, its
`SinkWriter` and its `SinkKind`), its line here, and its entry in the sink file's JSON Schema."""

from __future__ import annotations

from feedctl.sinks import cloudstorage, kafka, null, webhook
from feedctl.sinks.sink import Sink, SinkKind, SinkWriter, TaskTarget

SINKS: dict[str, type[Sink]] = {
    s.KIND.name: s for s in (cloudstorage.CloudStorageSink, kafka.KafkaSink, webhook.WebhookSink, null.NullSink)
}
# URI scheme -> (sink kind, the Python module its backend needs)
SCHEMES: dict[str, tuple[str, str | None]] = {
    scheme: (kind, module) for kind, sink in SINKS.items() for scheme, module in sink.KIND.schemes.items()
}


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def kind_of(uri: str) -> SinkKind | None:
    entry = SCHEMES.get(scheme_of(uri))
    return SINKS[entry[0]].KIND if entry else None


def option_kinds() -> dict[str, set[str]]:
    """Each sink option and the kinds of sink it applies to."""
    out: dict[str, set[str]] = {}
    for kind, sink in SINKS.items():
        for option in sink.KIND.options:
            out.setdefault(option, set()).add(kind)
    return out


def open_sink(uri: str, options: dict, project_root: str) -> Sink:
    """The driver side of the sink at `uri` (its kind known: the project checked the scheme)."""
    return SINKS[SCHEMES[scheme_of(uri)][0]](uri, options, project_root)


def writer(target: TaskTarget) -> SinkWriter:
    """The task side, inside a Spark task."""
    return SINKS[target.kind].Writer(target)


def close_clients() -> None:
    """Every sink's clients this process holds (`held_clients`) closed: the node drains."""
    kafka.PRODUCERS.close_all()
    cloudstorage.FILESYSTEMS.close_all()
    webhook.CONNECTIONS.close_all()
