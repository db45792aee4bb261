"""A testing knob: `FEEDCTL_TESTING_KILL_AT=<point>[:<n>]` makes the runner SIGKILL itself (its whole process
group, Spark's JVM included) the n-th time (default: the first) it reaches that point, so tests can stop a
real run at the exact instant a guarantee is most at risk."""

from __future__ import annotations

import os
import signal
from collections import Counter

POINTS = ("after-intent", "after-emit", "after-checkpoint", "after-resolved-file")
_reached: Counter = Counter()


def maybe_kill(point: str) -> None:
    wanted = os.environ.get("FEEDCTL_TESTING_KILL_AT")
    if not wanted:
        return
    name, _, nth = wanted.partition(":")
    if name != point:
        return
    _reached[point] += 1
    if _reached[point] == int(nth or 1):
        if os.getpgid(0) == os.getpid():  # a group leader takes its children (the JVM) down with it
            os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
