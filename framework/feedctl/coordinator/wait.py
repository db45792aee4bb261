"""How a step waits: a job's `Wake`, which counts how often it was set and tells the node's scheduler
(`node/scheduler.py`) to give the job a turn; and the `Wait` a generator of steps yields where it would
otherwise sleep, which the scheduler turns into a later turn and `drive` into a sleep on the caller's thread."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TypeVar


class Wake(threading.Event):
    """An event that counts how often it was set: a step knows whether anything woke the job since another.
    `on_set`: what else a wake does (the node's scheduler gives the job a turn)."""

    def __init__(self):
        super().__init__()
        self._sets = itertools.count(1)
        self.count = 0
        self.on_set: Callable[[], None] | None = None

    def set(self) -> None:
        self.count = next(self._sets)
        super().set()
        if self.on_set is not None:
            self.on_set()


@dataclass(frozen=True)
class Wait:
    """What a generator of steps yields where it would sleep: `seconds` at most, unless `on` is set first. On a
    scheduler the task's own wake ends it instead, so whatever sets `on` must wake the task too."""

    seconds: float
    on: threading.Event


Result = TypeVar("Result")


def drive(steps: Generator[Wait, None, Result]) -> Result:
    """Run `steps` on this thread, sleeping through each of its waits; what it returns."""
    try:
        wait = next(steps)
        while True:
            wait.on.wait(max(wait.seconds, 0.0))
            wait = next(steps)
    except StopIteration as end:
        return end.value


def pause(seconds: float, stop: threading.Event) -> Generator[Wait, None, bool]:
    """Wait `seconds`, whatever wakes the steps meanwhile, unless `stop` is set first: whether it was not."""
    until = time.monotonic() + seconds
    while not stop.is_set() and (left := until - time.monotonic()) > 0:
        yield Wait(left, stop)
    return not stop.is_set()
