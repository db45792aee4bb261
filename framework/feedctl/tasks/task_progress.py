"""A task's progress told to the driver while it runs: the messages and bytes it has handed to its sink so
far, as a UDP datagram at most five times a second (and once at its end). Best effort: a datagram lost costs
a bar a step, never a message; the counts that matter return with the task's results."""

from __future__ import annotations

import json
import socket
import time

from feedctl.sinks.sink import SinkWriter

INTERVAL = 0.2


class Beacon:
    def __init__(self, writer: SinkWriter):
        target = writer.target
        self.writer, self.messages, self.told = writer, 0, 0.0
        self.address = None
        if target.progress:
            host, _, port = target.progress.rpartition(":")
            self.address = (host, int(port))
            self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.key = [target.job_id, target.batch_seq, target.table, _task_id()]

    def add(self, messages: int) -> None:
        self.messages += messages
        if self.address is not None and time.monotonic() - self.told >= INTERVAL:
            self.tell()

    def tell(self) -> None:
        self.told = time.monotonic()
        try:
            self.socket.sendto(
                json.dumps([*self.key, self.messages, int(self.writer.bytes_out)]).encode(), self.address
            )
        except OSError:  # the driver gone or unreachable: the task goes on
            pass

    def close(self) -> None:
        """At the task's end: tell where it ended."""
        if self.address is not None:
            self.tell()
            self.socket.close()


def _task_id() -> int:
    """The task's partition: a retried attempt of it starts again from zero."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
