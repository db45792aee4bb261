"""What the several-node tests read of a cluster of `feedctl run --follow` processes, through the CLI as an
operator would: jobs, nodes, a feed's status and spans, verify's reports."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from feedctl.testing.nemesis.harness import deploy, node_copy, with_absolute_paths  # noqa: F401 (the tests' helpers too)
from support.projects import Cli, json_lines


def records(root: Path, command: str) -> list[dict]:
    result = Cli(root)(command, "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)


def status(root: Path, feed: str = "movr_all") -> dict:
    result = Cli(root)("status", feed, "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)[0]


def owners(record: dict) -> dict[tuple[str, int], str]:
    return {(s["table"], s["span"]): s["node"] for s in record["spans"]}


MOVR = {"movr.users", "movr.vehicles", "movr.rides"}  # movr_all's tables


def spread_over(root: Path, names: set[str], feed: str = "movr_all", tables: set[str] = MOVR):
    """The feed's status once its tables' spans (a regional-by-row table's, once its regions are found) are
    placed on exactly these nodes and none is on its way."""

    def placed():
        result = Cli(root)("status", feed, "--json")
        if result.exit_code != 0:  # no job yet
            return None
        record = json_lines(result.stdout)[0]
        spans = record["spans"]
        ready = (
            {s["table"] for s in spans} == tables
            and {s["node"] for s in spans} == names
            and not any(s["moving_to"] for s in spans)
        )
        return record if ready else None

    return placed


def verify_all(root: Path, feeds) -> list[dict]:
    reports = []
    for feed in sorted(feeds):
        result = Cli(root)("verify", feed, "--json")
        assert result.exit_code == 0, result.output
        reports.extend(json_lines(result.stdout))
    return reports


def wait_for(condition, what: str, timeout: float = 240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")


def drain(process, timeout: float = 120.0) -> None:
    """SIGTERM a `run --follow` process, as production drains a node; SIGKILL it if it has not exited in
    `timeout` seconds."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
