"""Webhook sink (`webhook-https://host/path?params`; `webhook-http://` for loopback endpoints).

- Messages go as HTTP POSTs of `{"payload": [...], "length": N}`, cut by `webhook_sink_config.Flush`
  (`Messages`, `Bytes`; all zero: one message per request, as in CockroachDB). The body is assembled from the
  encoded column, never message by message.
- One writer per Spark task sends its requests one after another, each only once the previous one is
  acknowledged. A task holds whole spans and a key lives in one span, so no two requests in flight share a
  key, and a key's messages arrive in order.
- A failed request (connection error, timeout, 5xx, 408, 429) is retried `Retry.Max` times (default 3, or
  `inf`), waiting `Retry.Backoff` (default 500ms) doubled each time up to 30 s; another 4xx, a redirect, or
  a certificate the endpoint does not pass fails at once.
  The batch counts as written only once every request is acknowledged with a 2xx.
- A resolved timestamp is its own POST of the bare resolved message.
- `webhook_auth_header` is sent as `Authorization` and never appears in an error.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import tempfile
import time
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from feedctl.encoding.compression import compress
from feedctl.errors import Unavailable
from feedctl.sinks.held_clients import Pooled, settings_key
from feedctl.sinks.sink import Sink, SinkKind, TaskTarget
from feedctl.sinks.stream import StreamWriter
from feedctl.sinks.uri_params import pem, truthy
from feedctl.units import Hlc, parse_duration

KIND = SinkKind(
    "webhook",
    {"webhook-https": None, "webhook-http": None},
    frozenset({"compression", "extra_headers", "webhook_sink_config", "webhook_auth_header", "webhook_client_timeout"}),
)

TLS_PARAMS = ("ca_cert", "client_cert", "client_key", "insecure_tls_skip_verify")
MAX_BACKOFF = 30.0
MIN_BACKOFF = 0.05  # `Backoff: 0s` with `Max: inf` must not spin
RETRYABLE_4XX = (408, 429)


_TLS_CONFIG = ("ca_cert", "client_cert", "client_key", "insecure")
# HTTP connections to the endpoints, each used by one writer at a time and given back when it is done, so that
# a node's batches and resolved messages one after another reuse one, rather than a handshake each.
CONNECTIONS = Pooled(lambda connection: connection.close())


class WebhookSinkError(RuntimeError):
    pass


class WebhookUnavailable(WebhookSinkError, Unavailable):
    """The endpoint refused, timed out or answered 5xx or 429 through every retry of a request."""


def _checked_headers(headers: dict) -> dict:
    """Header values go on the wire as they are: a line break would end the header early. Refused here,
    by name only (a value may be a secret)."""
    for name, value in headers.items():
        if any(c in str(value) for c in "\r\n\0"):
            raise WebhookSinkError(f"the {name} header holds a line break or NUL; remove it from its value")
    return headers


def sink_config(uri: str, sink_options: dict) -> dict:
    """Everything a writer needs, as plain values (it travels to the executors)."""
    parts = urlsplit(uri)
    params = parse_qsl(parts.query)
    tls = {k: v for k, v in params if k in TLS_PARAMS}
    scheme = "http" if parts.scheme == "webhook-http" else "https"
    url = urlunsplit(
        (scheme, parts.netloc, parts.path or "/", urlencode([p for p in params if p[0] not in TLS_PARAMS]), "")
    )
    config = sink_options.get("webhook_sink_config") or {}
    flush, retry = config.get("Flush") or {}, config.get("Retry") or {}
    headers = {"Content-Type": "application/json", **(sink_options.get("extra_headers") or {})}
    if sink_options.get("webhook_auth_header"):
        headers["Authorization"] = sink_options["webhook_auth_header"].strip()
    compression = sink_options.get("compression")
    if compression:
        headers["Content-Encoding"] = compression
    frequency = parse_duration(flush["Frequency"]) if flush.get("Frequency") else 0.0
    max_retries = retry.get("Max", 3)
    if ("client_cert" in tls) != ("client_key" in tls):
        raise WebhookSinkError("a client certificate needs both client_cert and client_key")
    return {
        "url": url,
        "ca_cert": pem(tls["ca_cert"]) if "ca_cert" in tls else None,
        "client_cert": pem(tls["client_cert"]) if "client_cert" in tls else None,
        "client_key": pem(tls["client_key"]) if "client_key" in tls else None,
        "insecure": truthy(tls.get("insecure_tls_skip_verify", "false")),
        "headers": _checked_headers(headers),
        "compression": compression,
        "timeout": parse_duration(sink_options.get("webhook_client_timeout") or "3s"),
        "messages": flush.get("Messages") or 0,
        "bytes": flush.get("Bytes") or 0,
        # Frequency alone (no size limit) sends what each Arrow batch brings; nothing at all: one per request.
        "batched": bool(flush.get("Messages") or flush.get("Bytes") or frequency),
        "max_retries": None if max_retries == "inf" else int(max_retries),
        "backoff": max(parse_duration(retry.get("Backoff") or "500ms"), MIN_BACKOFF),
    }


def request_target(url: str) -> str:
    """What a request names after the host: path and query."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _tls_context(config: dict) -> ssl.SSLContext:
    context = (
        ssl.create_default_context(cadata=config["ca_cert"]) if config["ca_cert"] else ssl.create_default_context()
    )
    if config["insecure"]:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config["client_cert"]:
        # ssl loads a certificate chain only from files: keep them for the moment it takes.
        with tempfile.TemporaryDirectory(prefix="feedctl-tls-") as folder:
            cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
            for path, text in ((cert, config["client_cert"]), (key, config["client_key"])):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                    f.write(text)
            context.load_cert_chain(cert, key)
    return context


def batch_ends(sizes, max_messages: int, max_bytes: int) -> tuple[list[int], int]:
    """Where full requests end in a run of messages of these sizes (in bytes, separator included): a request
    closes at `max_messages` messages or with the message that brings it to `max_bytes` (0: no limit).
    Returns the ends of the full requests and the start of the remainder."""
    import numpy as np

    ends: list[int] = []
    n, start = len(sizes), 0
    cumulative = np.cumsum(sizes)
    while start < n:
        end = n + 1  # not full
        if max_messages:
            end = min(end, start + max_messages)
        if max_bytes:
            base = int(cumulative[start - 1]) if start else 0
            end = min(end, int(np.searchsorted(cumulative, base + max_bytes, side="left")) + 1)
        if end > n:
            break
        ends.append(end)
        start = end
    return ends, start


class WebhookWriter:
    """Sends one task's messages, request after request, over one keep-alive connection."""

    def __init__(self, config: dict):
        self.config = config
        parts = urlsplit(config["url"])
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.target = request_target(config["url"])
        self.where = f"{parts.scheme}://{parts.netloc}{parts.path}"  # no query: it may hold a secret
        # the connections of one endpoint and settings, reused writer after writer (`CONNECTIONS`)
        self.endpoint = settings_key(
            [self.https, self.host, self.port, config["timeout"]] + [config[k] for k in _TLS_CONFIG]
        )
        self.connection: http.client.HTTPConnection | None = None
        self.pending = None  # encoded messages of a request not full yet
        self.requests = 0

    def send(self, values) -> None:
        """Queue encoded messages (a polars string column), posting every full request."""
        import numpy as np
        import polars as pl

        c = self.config
        if not c["batched"]:
            for i in range(len(values)):
                self._post_payload(values.slice(i, 1))
            return
        if not (c["messages"] or c["bytes"]):  # Frequency only: what this batch brought, in one request
            self._post_payload(values)
            return
        pending = pl.concat([self.pending, values.rename("v")]) if self.pending is not None else values.rename("v")
        sizes = pending.str.len_bytes().to_numpy().astype(np.int64) + 1
        ends, rest = batch_ends(sizes, c["messages"], c["bytes"])
        start = 0
        for end in ends:
            self._post_payload(pending.slice(start, end - start))
            start = end
        self.pending = pending.slice(rest)

    def finish(self) -> None:
        try:
            if self.pending is not None:
                self._post_payload(self.pending)
                self.pending = None
        finally:
            self.close()

    def close(self) -> None:
        """Done: the connection given back for the next writer to this endpoint."""
        if self.connection is not None:
            CONNECTIONS.give_back(self.endpoint, self.connection)
            self.connection = None

    def _drop(self) -> None:
        """The connection failed or the endpoint ends it: closed, never given back."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _connect(self) -> http.client.HTTPConnection:
        timeout = self.config["timeout"]
        if self.https:
            context = _tls_context(self.config)
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _post_payload(self, values) -> None:
        if len(values):
            self.post(f'{{"payload":[{values.str.join(",").item()}],"length":{len(values)}}}')

    def post(self, body: str) -> None:
        """POST one body, retrying per `Retry`; raise once the retries are spent."""
        c = self.config
        data = compress(body.encode("utf-8"), c["compression"])
        attempt, wait = 0, c["backoff"]
        while True:
            try:
                status, reason = self._request(data)
                if 200 <= status < 300:
                    self.requests += 1
                    return
                failure = f"HTTP {status} {reason}"
                if 300 <= status < 400 or (400 <= status < 500 and status not in RETRYABLE_4XX):
                    raise WebhookSinkError(f"{self.where} answered {failure}")
            except ssl.SSLCertVerificationError as exc:
                self._drop()
                raise WebhookSinkError(
                    f"{self.where}: the endpoint's certificate is not trusted ({exc.verify_message}); "
                    "pass its CA as ca_cert"
                ) from None
            except (http.client.InvalidURL, ValueError):  # their text may quote the URL's query or a header
                self._drop()
                raise WebhookSinkError(
                    f"{self.where}: the request cannot be made (a malformed URL or header)"
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                failure = f"{type(exc).__name__}: {exc}"
            attempt += 1
            if c["max_retries"] is not None and attempt > c["max_retries"]:
                # Refused, timing out, 5xx, 429: the endpoint is away or busy, which a later batch may find over.
                raise WebhookUnavailable(f"{self.where}: request failed after {attempt} attempts: {failure}")
            time.sleep(wait)
            wait = min(wait * 2, MAX_BACKOFF)

    def _request(self, data: bytes) -> tuple[int, str]:
        idle = False
        if self.connection is None:
            self.connection, idle = CONNECTIONS.take(self.endpoint, self._connect)
        try:
            self.connection.request("POST", self.target, body=data, headers=self.config["headers"])
            response = self.connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not idle:
                raise
            # an idle connection the endpoint closed meanwhile (its keep-alive timeout): a new one, at once
            self._drop()
            self.connection = self._connect()
            self.connection.request("POST", self.target, body=data, headers=self.config["headers"])
            response = self.connection.getresponse()
        response.read()  # drained, so the connection can carry the next request
        if response.will_close:
            self._drop()
        return response.status, response.reason


def write_resolved(uri: str, sink_options: dict, message: str) -> None:
    """The resolved message as its own request, acknowledged before this returns."""
    writer = WebhookWriter(sink_config(uri, sink_options))
    try:
        writer.post(message)
    finally:
        writer.close()


class WebhookTaskWriter(StreamWriter):
    """A task's messages, request after request, over one keep-alive connection."""

    def __init__(self, target: TaskTarget):
        super().__init__(target)
        self.requests = WebhookWriter(target.settings)

    def send(self, messages, values) -> None:
        self.requests.send(values)

    def acknowledged(self) -> None:
        self.requests.finish()


class WebhookSink(Sink):
    KIND = KIND
    Writer = WebhookTaskWriter

    def task_settings(self) -> dict:
        return sink_config(self.uri, self.options)

    def write_resolved(self, resolved: Hlc, fmt: str, envelope: str, topics: list[str]) -> str:
        from feedctl.encoding.json import resolved_message

        write_resolved(self.uri, self.options, resolved_message(str(resolved), envelope))
        return "webhook"

    def unreachable(self, timeout: float) -> str:
        """A connection to the endpoint's host and port: what a request needs first (no request is sent: an
        endpoint's every request may be a message to its consumers)."""
        parts = urlsplit(sink_config(self.uri, self.options)["url"])
        port = parts.port or (80 if parts.scheme == "http" else 443)
        try:
            socket.create_connection((parts.hostname, port), timeout=timeout).close()
        except OSError as exc:
            return f"{parts.hostname}:{port} does not accept connections ({exc.strerror or exc})"
        return ""

    def read(self, job_id: int, topics: list[str], spec, problem, capture: str | None = None):
        """One stream: the requests sent to the sink's path and query, in the order the endpoint acknowledged
        them, from the file it recorded them in (`feedctl.testing.webhook_capture`)."""
        from feedctl.sinks.messages import read_requests

        requests = read_capture(capture)  # now: a capture that cannot be read is the caller's error
        return [read_requests(requests, request_target(sink_config(self.uri, self.options)["url"]), spec, problem)]


def read_capture(path) -> list[dict]:
    """The requests an endpoint acknowledged, as `feedctl.testing.webhook_capture` records them: a JSON
    object per line, in the order it acknowledged them."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
