"""The short nemesis over one runner (`bench/nemesis.py`): kills at fault points and at random instants, pauses,
resumes, bursts and idle periods over three tables and three feeds, and with sink faults a Kafka broker killed
and started again; every run verified."""

from __future__ import annotations

import subprocess
import sys

from support import REPO


def test_the_short_nemesis_finds_no_violation():
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nemesis.py"), "--runs", "2", "--seed", "101"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 runs with violations" in result.stdout


def test_the_short_nemesis_with_sink_faults_finds_no_violation():
    """The same over a Kafka broker SIGKILLed and started again at random (`--sink-faults`)."""
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nemesis.py"), "--sink-faults", "--runs", "2", "--seed", "2"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 runs with violations" in result.stdout
