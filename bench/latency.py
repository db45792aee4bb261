"""Latency in `feedctl run --follow`: from a commit to its message being visible in the sink, and the lag
of resolved timestamps behind the wall clock, with `resolved: 1s`.

    .venv/bin/python bench/latency.py [--commits 60] [--every 1.0] [--poll-interval 0.2]

After a warm-up commit (Spark starting), a writer commits one small insert every `--every` seconds to a
table a feed follows (a `file://` sink,
`--poll-interval` between polls); a watcher lists the sink every 50 ms and notes when each commit's first
message appears and when each resolved file appears (its lag: the wall clock then minus the timestamp it
resolves). The last line is `latency: p50=<s> s p99=<s> s resolved lag: p50=<s> s p99=<s> s`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from catchup import BIN, rows, write_project
from deltalake import write_deltalake

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from feedctl.sinks import naming  # noqa: E402

ROWS_PER_COMMIT = 100


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Watcher:
    """Lists the sink every 50 ms: first sight of each commit's messages, and of each resolved file."""

    def __init__(self, sink: Path):
        self.sink = sink
        self.seen_files: set[Path] = set()
        self.visible: dict[int, float] = {}  # commit number -> when its first message was seen
        self.resolved_lag: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            if not self.sink.exists():
                continue
            now = time.time()
            for path in sorted(self.sink.rglob("*")):
                if path in self.seen_files or not path.is_file() or path.name.startswith("."):
                    continue
                self.seen_files.add(path)
                if path.name.endswith(".RESOLVED"):
                    resolved = naming.parse_ts33(path.name[:33])
                    self.resolved_lag.append(now - resolved.wall / 1e9)
                    continue
                for line in path.read_text().splitlines():
                    commit = json.loads(line)["after"]["id"] // ROWS_PER_COMMIT
                    self.visible.setdefault(commit, now)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--poll-interval", type=float, default=0.2)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    with tempfile.TemporaryDirectory(prefix="feedctl-latency-") as tmp:
        work = Path(tmp)
        table, sink, root = work / "orders", work / "sink", work / "project"
        write_deltalake(str(table), rows(0, ROWS_PER_COMMIT), configuration={"delta.enableChangeDataFeed": "true"})
        write_project(
            root,
            table,
            args.master,
            f"file://{sink}",
            {"initial_scan": "no", "updated": True, "resolved": "1s", "min_checkpoint_frequency": "1s"},
        )
        runner = subprocess.Popen(
            [
                str(BIN / "feedctl"),
                "--project-dir",
                str(root),
                "run",
                "--follow",
                "--poll-interval",
                str(args.poll_interval),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        watcher = Watcher(sink)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 120  # the job exists once it resolved its start
            while not any(p.name.endswith(".RESOLVED") for p in watcher.seen_files):
                if time.monotonic() > deadline or runner.poll() is not None:
                    raise SystemExit("the feed never resolved a timestamp")
                time.sleep(0.2)
            # Warm up: the first commit's message appears once Spark has started.
            write_deltalake(str(table), rows(ROWS_PER_COMMIT, ROWS_PER_COMMIT), mode="append")
            deadline = time.monotonic() + 300
            while 1 not in watcher.visible:
                if time.monotonic() > deadline or runner.poll() is not None:
                    raise SystemExit("the feed never emitted the warm-up commit")
                time.sleep(0.2)
            committed: dict[int, float] = {}
            for commit in range(2, args.commits + 2):
                write_deltalake(str(table), rows(commit * ROWS_PER_COMMIT, ROWS_PER_COMMIT), mode="append")
                committed[commit] = time.time()
                time.sleep(args.every)
            deadline = time.monotonic() + 30
            while len(watcher.visible) < args.commits + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(3)  # a few more resolved files after the last commit
        finally:
            watcher.stop.set()
            runner.terminate()
            runner.wait(timeout=60)
    latencies = [watcher.visible[c] - t for c, t in committed.items() if c in watcher.visible]
    lost = args.commits - len(latencies)
    lags = watcher.resolved_lag[2:]  # the first ones come while Spark starts
    if not latencies or not lags:
        raise SystemExit(f"{len(latencies)} commits seen, {len(lags)} resolved files: nothing to measure")
    print(
        f"{len(latencies)} commits seen ({lost} never seen), {len(lags)} resolved files; "
        f"commit to visible max {max(latencies):.2f} s, mean {statistics.mean(latencies):.2f} s"
    )
    print(
        f"latency: p50={percentile(latencies, 50):.2f} s p99={percentile(latencies, 99):.2f} s "
        f"resolved lag: p50={percentile(lags, 50):.2f} s p99={percentile(lags, 99):.2f} s"
    )
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
