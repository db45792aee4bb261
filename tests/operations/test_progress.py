"""Progress of a large initial scan: on a terminal (a real pseudo-terminal), rich's bar advances while the
tasks emit; off a terminal there is no bar; with `--log-format json`, progress comes as events."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from support.e2e import file_sink, write_project

FEEDCTL = str(Path(sys.executable).parent / "feedctl")
ROWS = 3_000_000  # one task emits them all: a second or more on this machine, so that the bar has steps
FILES = 10
BAR = re.compile(r"([0-9][0-9,]*)/~([0-9][0-9,]*) rows")


def _project(tmp_path) -> Path:
    path = tmp_path / "data" / "events"
    part = ROWS // FILES
    for i in range(FILES):  # a file per commit: the tasks read and emit file after file
        write_deltalake(
            str(path),
            pa.table(
                {
                    "id": pa.array(range(i * part, (i + 1) * part), pa.int64()),
                    "kind": pa.array(["a", "b", "c"] * (part // 3), pa.string()),
                }
            ),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    return write_project(
        tmp_path / "p",
        {"events": {"path": str(path), "primary_key": ["id"], "spans": 1}},
        [{"name": n, "tables": ["s.events"], "sink": n} for n in ("on_tty", "piped", "as_json")],
        [file_sink(n) for n in ("on_tty", "piped", "as_json")],
    )


def _in_a_terminal(args: list[str]) -> str:
    leader, follower = pty.openpty()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    process = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    out = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process and its terminal are gone
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert process.wait(600) == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


def test_a_large_scan_shows_its_progress_on_a_terminal_and_only_there(tmp_path):
    root = _project(tmp_path)
    screen = _in_a_terminal([FEEDCTL, "--project-dir", str(root), "run", "-s", "on_tty"])
    steps = [(int(done.replace(",", "")), int(total.replace(",", ""))) for done, total in BAR.findall(screen)]
    between = sorted({done for done, _ in steps if 0 < done < ROWS})
    assert len(between) >= 2, screen[-3000:]  # it advanced while the tasks ran
    assert all(0 < total <= ROWS for _, total in steps)
    assert "rows/s" in screen and "━" in screen
    assert f"emitted {ROWS} messages" in screen

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    piped = subprocess.run(
        [FEEDCTL, "--project-dir", str(root), "run", "-s", "piped"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert piped.returncode == 0, piped.stderr
    assert f"emitted {ROWS} messages" in piped.stdout
    assert not BAR.search(piped.stdout + piped.stderr) and "━" not in piped.stdout + piped.stderr
    assert "\x1b[" not in piped.stdout  # no cursor movement either

    machine = subprocess.run(
        [FEEDCTL, "--log-format", "json", "--project-dir", str(root), "run", "-s", "as_json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert machine.returncode == 0, machine.stderr
    events = [json.loads(line) for line in machine.stdout.splitlines() if line.startswith("{")]
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["done"] and progress[-1]["rows"] == progress[-1]["rows_total"] == ROWS
    assert all(e["kind"] == "scan" and e["feed"] == "as_json" and "time" in e for e in progress)
    [batch] = [e for e in events if e["event"] == "batch"]
    assert batch["messages"] == ROWS and events.index(progress[-1]) < events.index(batch)
