"""How a step waits: a job's `Wake`, which counts how often it was set and tells the node's scheduler
(`node/scheduler.py`) to give the job a turn; the `Wait` a generator of steps yields where it would otherwise
sleep, which the scheduler turns into a later turn and `drive` into a sleep on the caller's thread; and the `Ask`
it yields where it reads or writes the store, which the scheduler answers together with what other feeds' steps
ask meanwhile (`node/scheduler.Gathered`: one snapshot, one transaction) and `drive` answers alone."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


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


class Answers(Protocol):
    def alone(self, item: Any) -> Any:
        """The answer to `item` asked by itself, on the caller's thread."""


@dataclass(frozen=True)
class Ask:
    """What a step yields to have `item` answered by `by`: the step is resumed with the answer, or with the error
    the answer raised thrown into it, as a call would have returned or raised. `key` (a job id) orders the items
    answered together, so that two nodes lock rows in one order."""

    by: Answers
    key: int
    item: Any


Result = TypeVar("Result")
# A generator of steps returning a `Result`: what a feed's run, its spans' emission and their waits are.
Stepping = Generator[Wait | Ask, Any, Result]


def drive(steps: Stepping[Result]) -> Result:
    """Run `steps` on this thread, sleeping through each of its waits and answering each of its asks alone; what
    it returns."""
    answer, error = None, None
    while True:
        try:
            yielded = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as end:
            return end.value
        answer, error = None, None
        if isinstance(yielded, Wait):
            yielded.on.wait(max(yielded.seconds, 0.0))
            continue
        try:
            answer = yielded.by.alone(yielded.item)
        except Exception as exc:
            error = exc


def pause(seconds: float, stop: threading.Event) -> Stepping[bool]:
    """Wait `seconds`, whatever wakes the steps meanwhile, unless `stop` is set first: whether it was not."""
    until = time.monotonic() + seconds
    while not stop.is_set() and (left := until - time.monotonic()) > 0:
        yield Wait(left, stop)
    return not stop.is_set()
