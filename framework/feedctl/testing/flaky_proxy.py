"""An HTTP proxy in front of a store's endpoint that fails every Nth request, for fault tests.

    python -m feedctl.testing.flaky_proxy --port P --target 127.0.0.1:9000 --fail-every 4 [--status 503]
        [--max-failures N] [--log FILE]

Every request is forwarded to the target as it came (headers, Host included, so signatures still hold),
except every `--fail-every`th (up to `--max-failures` of them), which is answered with `--status` and a
throttling body (S3's `SlowDown`) and counted as one line in `--log`.
"""

from __future__ import annotations

import argparse
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

THROTTLED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def _handler(target: str, fail_every: int, status: int, log: str | None, max_failures: int | None = None):
    host, port = target.rsplit(":", 1)
    lock = threading.Lock()
    count, failed = [0], [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            with lock:
                count[0] += 1
                fail = (
                    fail_every > 0 and count[0] % fail_every == 0 and (max_failures is None or failed[0] < max_failures)
                )
                failed[0] += fail
            if fail:
                if log:
                    with lock, open(log, "a", encoding="utf-8") as f:
                        f.write(f"{status} {self.command} {self.path}\n")
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(THROTTLED)))
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(THROTTLED)
                return
            upstream = http.client.HTTPConnection(host, int(port), timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
            finally:
                upstream.close()
            self.send_response(response.status, response.reason)
            for k, v in response.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            # A HEAD answer has no body but tells the object's size.
            length = response.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
            self.send_header("Content-Length", length)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True, help="host:port of the real endpoint")
    parser.add_argument("--fail-every", type=int, default=4)
    parser.add_argument("--status", type=int, default=503)
    parser.add_argument("--max-failures", type=int, help="fail no more requests than this (default: no limit)")
    parser.add_argument("--log", help="file with one line per failed request")
    args = parser.parse_args(argv)
    handler = _handler(args.target, args.fail_every, args.status, args.log, args.max_failures)
    ThreadingHTTPServer((args.host, args.port), handler).serve_forever()


if __name__ == "__main__":
    main()
