"""The kill knob: `feedctl run --testing-kill-at <point>[:<n>]` makes the runner SIGKILL itself (its whole
process group, Spark's JVM included) the n-th time (default: the first) it reaches that point
(`coordinator/knobs.py`), so tests can stop a real run at the exact instant a guarantee is most at risk."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from feedctl.coordinator.knobs import POINTS


def killer(spec: str) -> Callable[[str], None]:
    """A `TestingKnobs.reached` that kills this process the n-th time it passes the point `spec` names."""
    point, _, nth = spec.partition(":")
    if point not in POINTS or not (nth or "1").isdigit():
        raise ValueError(f"{spec!r}: expected one of {', '.join(POINTS)}, optionally :N")
    passed = 0

    def reached(at: str) -> None:
        nonlocal passed
        if at != point:
            return
        passed += 1
        if passed == int(nth or 1):
            if os.getpgid(0) == os.getpid():  # a group leader takes its children (the JVM) down with it
                os.killpg(0, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

    return reached
