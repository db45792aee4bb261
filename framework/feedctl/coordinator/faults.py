"""A testing knob: `FEEDCTL_TESTING_KILL_AT=<point>` makes the runner SIGKILL itself at that point, so
tests can stop a real run at the exact instant a guarantee is most at risk."""

from __future__ import annotations

import os
import signal

POINTS = ("after-intent", "after-emit", "after-checkpoint", "after-resolved-file")


def maybe_kill(point: str) -> None:
    if os.environ.get("FEEDCTL_TESTING_KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
