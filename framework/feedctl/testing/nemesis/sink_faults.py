"""The nemesis's sink fault: the Kafka broker (Tansu) that `movr_all` writes to, SIGKILLed during a round and
started again on its port some seconds later, perhaps under a later runner. Its log lives in the bucket of a
moto S3 server that stays up, so the broker comes back with its topics, as a real one comes back with its
disks."""

from __future__ import annotations

import signal
import time

from feedctl.testing import devservers

SINK = "warehouse_files"  # movr_all's sink: the feed with the most messages
# Deliveries to the broker away time out after 3 s rather than a minute, so that an outage of a few seconds
# meets feedctl's retries rather than only the client's; the retries' waits are capped at 4 s for the same reason.
RUNNER_ENV = {"FEEDCTL_TESTING_KAFKA_MESSAGE_TIMEOUT_MS": "3000"}
RUNNER_ARGS = ("--max-retry-backoff", "4")


class Broker:
    def __init__(self) -> None:
        from feedctl.sinks.cloudstorage import SinkFolder

        self.s3 = devservers.moto_s3()
        try:
            store = {"endpoint_url": self.s3.endpoint, "key": "testing", "secret": "testing"}
            SinkFolder("s3://tansu", "/", store).fs.mkdir("tansu")
            self.server = self._start()
        except BaseException:
            self.s3.stop()
            raise
        self.back_at: float | None = None  # time.monotonic() at which a broker away starts again
        self.outages = 0

    @property
    def uri(self) -> str:
        return f"kafka://{self.server.env['KAFKA_BOOTSTRAP']}?topic_prefix=movr_"

    def _start(self, port: int | None = None) -> devservers.Server:
        server = devservers.tansu(port, s3=self.s3)
        server.stop_signal = signal.SIGKILL  # it dies, rather than shuts down
        return server

    def kill_for(self, seconds: float) -> None:
        if self.back_at is None:
            self.server.stop()
            self.outages += 1
        self.back_at = time.monotonic() + seconds

    def tick(self) -> None:
        """Starts the broker again once its outage is over."""
        if self.back_at is not None and time.monotonic() >= self.back_at:
            self.up()

    def up(self) -> None:
        if self.back_at is not None:
            self.server = self._start(self.server.port)
            self.back_at = None

    def close(self) -> None:
        self.server.stop()
        self.s3.stop()
