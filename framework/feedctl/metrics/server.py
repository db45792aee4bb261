"""`/metrics` of a `feedctl run --follow` node, in Prometheus' text format, on 127.0.0.1 unless the project's
`metrics: {host: ...}` says otherwise."""

from __future__ import annotations

from contextlib import contextmanager

from prometheus_client import start_http_server

from feedctl.diagnostics import UsageError
from feedctl.metrics.changefeed import REGISTRY
from feedctl.metrics.node_gauges import NodeGauges

DEFAULT_HOST = "127.0.0.1"


@contextmanager
def serving(host: str, port: int, gauges: NodeGauges):
    """Serve the node's metrics while the block runs; yields the port (the one chosen, for port 0)."""
    REGISTRY.register(gauges)
    try:
        server, thread = start_http_server(port, host, registry=REGISTRY)
    except OSError as exc:
        REGISTRY.unregister(gauges)
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        REGISTRY.unregister(gauges)
