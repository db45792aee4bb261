"""Spark as people see it run: a `--follow` node whose feeds start together starts one JVM, its output holds
no JVM or log4j noise, and `--debug` lets Spark's own warnings through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support.e2e import CHURN_ROWS, Table, file_sink, write_project
from support.nodes import wait_for

FEEDCTL = str(Path(sys.executable).parent / "feedctl")
NOISE = ("log4j", "WARNING: Using incubator modules", "NativeCodeLoader", "Setting default log level", "sc.setLogLevel")
FEEDS = ("a", "b", "c")


def _jvms(pid: int) -> int:
    found = subprocess.run(["pgrep", "-P", str(pid), "java"], capture_output=True, text=True).stdout.split()
    return len(found)


def test_a_node_starts_one_quiet_jvm_and_debug_lets_spark_speak(tmp_path):
    table = Table(tmp_path / "data" / "users", {"id": "int64", "name": "string", "n": "int32"}, ["id"], CHURN_ROWS)
    root = write_project(
        tmp_path / "p",
        {"users": {"path": str(table.path), "primary_key": ["id"]}},
        [{"name": n, "tables": ["s.users"], "sink": n} for n in FEEDS],
        [file_sink(n) for n in FEEDS],
    )
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("FEEDCTL_SPARK_LOG_LEVEL", None)
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        node = subprocess.Popen(
            [FEEDCTL, "--project-dir", str(root), "run", "--follow"], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:

        def scanned():
            listed = subprocess.run(
                [FEEDCTL, "--project-dir", str(root), "jobs", "--json"],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            ).stdout.splitlines()
            return len([j for j in map(json.loads, listed) if j["high_water_timestamp"]]) == len(FEEDS)

        wait_for(scanned, "every feed's scan is checkpointed", 300)
        assert _jvms(node.pid) == 1  # the three feeds' threads asked for Spark at once
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(120)
    text = log.read_text()
    assert "a: batch 1 (scan) emitted 60 messages" in text
    assert not [line for line in text.splitlines() if any(n in line for n in NOISE)], text

    # A scan to emit: Spark starts (a few changes the node would write itself)
    subprocess.run([FEEDCTL, "--project-dir", str(root), "cancel", "a"], check=True, env=env, timeout=120)
    debug = subprocess.run(
        [FEEDCTL, "--debug", "--project-dir", str(root), "run", "--new-job", "--rescan", "-s", "a"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert debug.returncode == 0, debug.stderr
    assert "a: batch 1 (scan) emitted 60 messages" in debug.stdout
    assert "WARNING: Using incubator modules" in debug.stderr and " spark WARN " in debug.stderr, debug.stderr
