"""The kill knob a test passes to `feedctl run --testing-kill-at`: it kills the process the n-th time the run
passes its point, and nothing else; a point it does not know is refused."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from feedctl.testing.faults import killer


def _passes(spec: str, points: list[str]) -> int:
    """The exit code of a process that passes `points` with the knob of `spec` set (0: it lived)."""
    code = f"from feedctl.testing.faults import killer\nk = killer({spec!r})\nfor p in {points!r}:\n    k(p)\n"
    return subprocess.run([sys.executable, "-c", code], start_new_session=True).returncode


def test_the_run_is_killed_the_nth_time_it_passes_the_point():
    assert _passes("after-emit:2", ["after-emit", "after-intent", "after-checkpoint"]) == 0
    assert _passes("after-emit:2", ["after-emit", "after-intent", "after-emit"]) == -signal.SIGKILL
    assert _passes("after-intent", ["after-intent"]) == -signal.SIGKILL


def test_a_point_the_run_does_not_have_is_refused():
    with pytest.raises(ValueError, match="after-intent, after-emit, after-checkpoint, after-resolved-file"):
        killer("after-lunch")
    with pytest.raises(ValueError):
        killer("after-emit:twice")
