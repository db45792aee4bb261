"""The short nemesis over three nodes (`bench/nemesis.py --nodes --changes`): kills, SIGSTOP/SIGCONT, drains and
joins while the workload commits, and, each node with its own copy of the project, a table added and one
dropped in place (deployed to the nodes at different moments) and a job continued by a new one while the
nodes follow; on each state store; every feed verifies clean, and the sink across a feed's jobs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support import REPO


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_short_node_nemesis_finds_no_violation(store):
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "nemesis.py"),
            "--nodes",
            "--changes",
            "--store",
            store,
            "--runs",
            "1",
            "--seed",
            "201",
        ],
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 runs with violations" in result.stdout
