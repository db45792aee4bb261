"""A webhook endpoint that records what it receives, for tests and for `feedctl verify --capture`.

    [WEBHOOK_CAPTURE_AUTH="Bearer ..."] python -m feedctl.testing.webhook_capture --port 8443 --capture capture.ndjson
        [--certfile C --keyfile K]

Each accepted POST is appended to the capture file as one JSON line `{"seq", "path", "headers", "body"}`
(the body decompressed; the Authorization header left out), before the answer is sent: the file's order is
the order in which requests were acknowledged. With `WEBHOOK_CAPTURE_AUTH` set (an environment variable, so
the secret stays out of the process list), a request without that Authorization header gets 401 and is not
recorded.

`POST /_control` with `{"fail": N, "status": 503}` makes the next N requests fail with that status (not
recorded); `{"delay": S, "count": N}` makes the next N requests wait S seconds before answering (recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from feedctl.encoding.compression import decompress

CONTROL_PATH = "/_control"
AUTH_ENV = "WEBHOOK_CAPTURE_AUTH"


class _State:
    def __init__(self, capture: str, auth: str | None):
        self.capture = open(capture, "a", encoding="utf-8")
        self.auth = auth
        self.lock = threading.Lock()
        self.seq = 0
        self.fail, self.fail_status = 0, 503
        self.delay, self.delay_count = 0.0, 0


def _decoded(body: bytes, encoding: str | None) -> str:
    return decompress({"gzip": "body.gz", "zstd": "body.zst"}.get(encoding or "", "body"), body).decode("utf-8")


def _handler(state: _State):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a production endpoint offers

        def log_message(self, *args) -> None:  # quiet: the capture file is the record
            pass

        def _answer(self, status: int, text: str = "") -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == CONTROL_PATH:
                settings = json.loads(body)
                with state.lock:
                    state.fail = settings.get("fail", state.fail)
                    state.fail_status = settings.get("status", state.fail_status)
                    state.delay = settings.get("delay", state.delay)
                    state.delay_count = settings.get("count", state.delay_count)
                self._answer(200)
                return
            if state.auth is not None and self.headers.get("Authorization") != state.auth:
                self._answer(401, "unauthorized")
                return
            with state.lock:
                if state.fail > 0:
                    state.fail -= 1
                    status = state.fail_status
                else:
                    status = 200
                delay = 0.0
                if status == 200 and state.delay_count > 0:
                    state.delay_count -= 1
                    delay = state.delay
            if status != 200:
                self._answer(status, "failing on demand")
                return
            try:
                text = _decoded(body, self.headers.get("Content-Encoding"))
            except (OSError, ValueError) as exc:
                self._answer(400, f"cannot decode the body: {exc}")
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
            with state.lock:
                state.seq += 1
                state.capture.write(
                    json.dumps({"seq": state.seq, "path": self.path, "headers": headers, "body": text}) + "\n"
                )
                state.capture.flush()
            if delay:
                threading.Event().wait(delay)
            self._answer(200)

    return Handler


def control(url: str, settings: dict, cafile: str | None = None) -> None:
    """Change how the endpoint at `url` answers (see the module's docstring)."""
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https") else None
    request = urllib.request.Request(url.rstrip("/") + CONTROL_PATH, data=json.dumps(settings).encode(), method="POST")
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        response.read()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--capture", required=True, help="file the accepted requests are appended to")
    parser.add_argument("--certfile", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--keyfile", help="and this private key (PEM)")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), _handler(_State(args.capture, os.environ.get(AUTH_ENV))))
    if args.certfile:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.certfile, args.keyfile)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
