"""Many feeds on one node: N plain feeds over T tables, each feed into a `file://` folder of its own with
`resolved: 1s`, on one `feedctl run --follow` node (or `--nodes K` sharing one state store: a SQLite file, or with
`--state postgresql` a private PostgreSQL server, as nodes on several hosts share), while a writer commits a small
insert once a second to the tables in turn.

    .venv/bin/python bench/feeds.py [--feeds 100] [--tables 4] [--seconds 60] [--poll-interval 0.5] [--nodes 1]
        [--idle-seconds 20] [--settle 0] [--logs DIR] [--state sqlite|postgresql]

Every table first gets a warm-up commit, which every feed must show before the timing starts (the node's start:
Spark, every job made). Then, for `--seconds`, a watcher told by the kernel of each file as it appears (inotify)
notes when each feed first shows each commit of its table, and each resolved file's lag (the wall clock at sight
minus the timestamp it resolves). The node's CPU seconds (its process and the JVM it starts; of all nodes together;
not the PostgreSQL server's) over that window give the cost per feed-minute; before it, `--idle-seconds` with no
commit at all, once `--settle` seconds have let every feed's last batch be checkpointed, give an idle feed's cost.
Its peak resident memory is the driver's `VmHWM` (the largest node's). The last line is `feeds: N=<n> T=<t>
nodes=<k> start=<s> s visible p50=<s> p99=<s> s resolved lag p99=<s> s behind=<k> cpu=<s> s/feed-min idle=<s>
s/feed-min rss=<MiB> MiB tx/s=<writes>w+<reads>r read=<rows> shared=<rows> threads=<n> python_threads=<n>`,
where `behind` counts the feeds with no resolved file past the last commit 30 s after it, `tx/s` the state store's
transactions per second over the window (the node's `feedctl_state_transactions` counter), `read` and `shared` the
change rows the feeds' batches read from Delta and took from another feed's read (`rows_read`, `rows_shared` of
each batch's result in the state store), `threads` the most threads a node's Python process had in the window,
and `python_threads` the most of them its interpreter started (those named as the process is: delta-rs's runtime,
jemalloc and polars name theirs).
The lines before it say where the pairs' latency went (`phases`): commit → batch cut, cut → visible, visible → the
batch taken into the feed's mark.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from catchup import BIN, rows
from deltalake import write_deltalake
from latency import percentile
from proc_memory import _status, _tree
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from feedctl.sinks import naming  # noqa: E402
from feedctl.testing.postgres import postgres  # noqa: E402

ROWS = 10  # rows per commit; commit k inserts ids k*ROWS ... into table k % T


def write_project(
    root: Path, tables: list[Path], feeds: int, resolved: str = "1s", state: str = "sqlite:///target/state.db"
) -> None:
    (root / "feeds").mkdir(parents=True)
    (root / "sinks").mkdir()
    project = {
        "name": "feeds",
        "config-version": 1,
        "state": state,
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
        "sources": [{"name": "s", "tables": [{"name": t.name, "path": str(t), "primary_key": ["id"]} for t in tables]}],
    }
    (root / "project.yml").write_text(json.dumps(project))
    options = {"initial_scan": "no"}
    if resolved:  # every feed resolving timestamps this often (none: no `resolved` option)
        options |= {"resolved": resolved, "min_checkpoint_frequency": resolved}
    feed_list = [
        {"name": f"f{i}", "tables": [f"s.{tables[i % len(tables)].name}"], "sink": f"k{i}", "options": options}
        for i in range(feeds)
    ]
    (root / "feeds" / "f.yml").write_text(json.dumps({"feeds": feed_list}))
    sinks = [{"name": f"k{i}", "uri": f"file://{root / 'out' / f'f{i}'}"} for i in range(feeds)]
    (root / "sinks" / "s.yml").write_text(json.dumps({"sinks": sinks}))


class Watcher:
    """First sight of each (feed, commit) and of each resolved file, told by the kernel as each file appears
    (inotify): listing 1,000 folders of hundreds of files every 250 ms took a fifth of a core from the nodes
    it measures, and saw a file up to 250 ms late. Where a folder's events overflowed the kernel's queue,
    every folder is listed once."""

    def __init__(self, out: Path, feeds: int):
        self.folders = [str(out / f"f{i}") for i in range(feeds)]
        for folder in self.folders:  # made before the nodes start, so that a feed's first day is watched
            os.makedirs(folder, exist_ok=True)
        self.seen: dict[str, set[str]] = {}  # a day's folder -> the names seen in it
        self.visible: dict[tuple[int, int], float] = {}  # (feed, commit) -> first sight
        self.resolved: dict[int, list[tuple[float, float]]] = {}  # feed -> [(sight, resolved wall s)]
        self.stop = threading.Event()
        self._inotify = Inotify()
        self._watched: dict[int, tuple[int, str, bool]] = {}  # watch -> (feed, folder, is a day's folder)
        for feed, folder in enumerate(self.folders):
            self._watched[self._inotify.add(folder)] = (feed, folder, False)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                events = self._inotify.read(0.25)
                now = time.time()
                if events is None:  # the queue overflowed: some files were not told
                    for feed, folder in enumerate(self.folders):
                        for day in _listed(folder):
                            self._day(feed, os.path.join(folder, day), now)
                    continue
                for watch, is_dir, name in events:
                    if watch not in self._watched or name.startswith("."):  # "." begins a file being written
                        continue
                    feed, folder, is_day = self._watched[watch]
                    if not is_day and is_dir:
                        self._day(feed, os.path.join(folder, name), now)
                    elif is_day:
                        self._file(feed, folder, name, now)
        finally:
            self._inotify.close()

    def _day(self, feed: int, where: str, now: float) -> None:
        """A day's folder: watched from now on, and what it already holds (written before the watch) seen."""
        if where not in self.seen:
            self.seen[where] = set()
            self._watched[self._inotify.add(where)] = (feed, where, True)
        for name in _listed(where):
            if not name.startswith("."):
                self._file(feed, where, name, now)

    def _file(self, feed: int, where: str, name: str, now: float) -> None:
        seen = self.seen.setdefault(where, set())
        if name in seen:
            return
        seen.add(name)
        if name.endswith(".RESOLVED"):
            self.resolved.setdefault(feed, []).append((now, naming.parse_ts33(name[:33]).wall / 1e9))
            return
        for line in Path(where, name).read_text().splitlines():
            self.visible.setdefault((feed, json.loads(line)["after"]["id"] // ROWS), now)


class Inotify:
    """Linux's inotify through libc: the names created in or moved into the folders watched."""

    _CREATE, _MOVED_TO, _OVERFLOW, _ISDIR = 0x100, 0x80, 0x4000, 0x40000000
    _HEADER = struct.Struct("iIII")  # watch, mask, cookie, length of the name

    def __init__(self):
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")

    def add(self, folder: str) -> int:
        watch = self._libc.inotify_add_watch(self.fd, folder.encode(), self._CREATE | self._MOVED_TO)
        if watch < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        return watch

    def read(self, timeout: float) -> list[tuple[int, bool, str]] | None:
        """The (watch, is a folder, name) of the files made since the last read, waiting up to `timeout` for
        one; None when the kernel's queue overflowed meanwhile."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        events = []
        while True:
            try:
                data = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return events
            at = 0
            while at < len(data):
                watch, mask, _, length = self._HEADER.unpack_from(data, at)
                at += self._HEADER.size
                name = data[at : at + length].split(b"\0", 1)[0].decode()
                at += length
                if mask & self._OVERFLOW:
                    return None
                events.append((watch, bool(mask & self._ISDIR), name))

    def close(self) -> None:
        os.close(self.fd)


def _listed(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def transactions(ports: list[int]) -> dict[str, float]:
    """The nodes' state store transactions so far, by kind (their `feedctl_state_transactions` counters)."""
    out: dict[str, float] = {}
    for port in ports:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120).read().decode()
        for line in text.splitlines():
            if line.startswith("feedctl_state_transactions_total{"):
                kind = line.split('kind="', 1)[1].split('"', 1)[0]
                out[kind] = out.get(kind, 0) + float(line.rsplit(" ", 1)[1])
    return out


def free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


def rows_read(store: Engine) -> tuple[int, int]:
    """Change rows the feeds' batches read from Delta, and those they took from another feed's read."""
    with store.connect() as db:
        rows = db.execute(text("SELECT result FROM batch_intents WHERE result != ''")).all()
    results = [json.loads(r) for (r,) in rows]
    return sum(r.get("rows_read", 0) for r in results), sum(r.get("rows_shared", 0) for r in results)


def phases(store: Engine, committed: dict[int, float], visible: dict[tuple[int, int], float], t: int) -> dict:
    """Where each (feed, commit) pair's latency went, from the state store's batch records: commit → its batch
    cut (`created_at`), cut → the first file holding it (the watcher's sight), that sight → the batch taken into
    the feed's mark (`finished_at`). Commit k (k ≥ T) is version k // T + 1 of table k % T: each table was made
    at version 0 and given its warm-up commit at version 1."""
    with store.connect() as db:
        rows = db.execute(
            text(
                "SELECT j.feed, i.ranges, i.created_at, i.finished_at FROM batch_intents i "
                "JOIN jobs j ON j.job_id = i.job_id WHERE i.kind = 'changes'"
            )
        ).all()
    cuts: dict[tuple[int, int], tuple[float, float | None]] = {}  # (feed, table's version) -> (cut, taken)
    for feed, ranges, created, finished in rows:
        for low, high in json.loads(ranges).values():
            for version in range(low + 1, high + 1):
                cuts[int(feed[1:]), version] = (created, finished)
    out: dict[str, list[float]] = {"commit→cut": [], "cut→visible": [], "visible→taken": []}
    for (feed, k), seen in visible.items():
        if k not in committed or (feed, k // t + 1) not in cuts:
            continue
        cut_at, taken_at = cuts[feed, k // t + 1]
        out["commit→cut"].append(cut_at - committed[k])
        out["cut→visible"].append(seen - cut_at)
        if taken_at is not None:
            out["visible→taken"].append(taken_at - seen)
    return out


def placed(store: Engine) -> int:
    """Running jobs whose every span has a node."""
    try:
        with store.connect() as db:
            return db.execute(
                text(
                    "SELECT count(*) FROM jobs WHERE status = 'running' AND job_id NOT IN "
                    "(SELECT job_id FROM span_frontiers WHERE node_id IS NULL) AND job_id IN "
                    "(SELECT job_id FROM span_frontiers)"
                )
            ).scalar_one()
    except DBAPIError:  # not made yet
        return 0


def cpu_seconds(nodes: list[subprocess.Popen]) -> float:
    """User and system time of the nodes and their descendants so far."""
    ticks = 0
    for member in (m for node in nodes for m in _tree(node.pid)):
        try:
            with open(f"/proc/{member}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def say(line: str) -> None:
    """A phase of the run, on stderr as it begins: where to look while it runs (py-spy, the nodes' logs)."""
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def wait(condition, what: str, timeout: float, nodes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or any(node.poll() is not None for node in nodes):
            raise SystemExit(f"gave up waiting until {what}")
        time.sleep(0.25)


def _python_threads(pid: int) -> int:
    """The threads of process `pid` named as the process is: those its interpreter started (a native library's
    pools name their own threads, `tokio-rt-worker`, `jemalloc_bg_thd`)."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        name = Path(f"/proc/{pid}/comm").read_text()
        return sum(1 for task in tasks.iterdir() if _comm(task) == name)
    except OSError:  # the node has ended
        return 0


def _comm(task: Path) -> str:
    try:
        return (task / "comm").read_text()
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=100)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--poll-interval", type=float, default=0.5)
    parser.add_argument("--idle-seconds", type=int, default=20)
    parser.add_argument("--settle", type=int, default=0, help="seconds after the warm-up before the idle window")
    parser.add_argument("--resolved", default="1s", help="the feeds' `resolved` option; 'none': not set")
    parser.add_argument("--nodes", type=int, default=1, help="--follow nodes sharing the feeds (one SQLite store)")
    parser.add_argument("--logs", type=Path, help="a folder for each node's log (default: none kept)")
    parser.add_argument(
        "--state",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="the nodes' state store: a SQLite file (one host), or a private PostgreSQL server (several hosts)",
    )
    args = parser.parse_args()
    n, t = args.feeds, args.tables
    env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    with tempfile.TemporaryDirectory(prefix="feedctl-feeds-") as tmp, ExitStack() as servers:
        work = Path(tmp)
        tables = [work / f"t{i}" for i in range(t)]
        for table in tables:
            write_deltalake(str(table), rows(10**9, 1), configuration={"delta.enableChangeDataFeed": "true"})
        root = work / "project"
        resolved = None if args.resolved == "none" else args.resolved
        if args.state == "postgresql":
            state = servers.enter_context(postgres()).url
            store = create_engine(state)
        else:
            state = "sqlite:///target/state.db"
            store = create_engine(f"sqlite:///{root}/target/state.db")
        servers.callback(store.dispose)
        write_project(root, tables, n, resolved, state)
        watcher = Watcher(root / "out", n)  # before the nodes: it makes the feeds' folders and watches them
        started = time.monotonic()
        argv = [str(BIN / "feedctl"), "--project-dir", str(root), "run", "--follow"]
        ports = [free_port() for _ in range(args.nodes)]
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
        logs = [open(args.logs / f"n{i}.log", "w") if args.logs else subprocess.DEVNULL for i in range(args.nodes)]
        nodes = [
            subprocess.Popen(
                [*argv, "--poll-interval", str(args.poll_interval), "--metrics-port", str(port), "--node-id", f"n{i}"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            for i, (port, log) in enumerate(zip(ports, logs))
        ]
        threading.Thread(target=watcher.run, daemon=True).start()
        try:
            if resolved:
                wait(lambda: len(watcher.resolved) == n, "every feed resolved a timestamp", 900, nodes)
            else:  # every job made and placed: its spans past their first batch
                wait(lambda: placed(store) == n, "every feed's job is placed", 900, nodes)
            for k in range(t):  # a warm-up commit to each table, which every feed must show
                write_deltalake(str(tables[k]), rows(k * ROWS, ROWS), mode="append")
            wait(
                lambda: all((f, f % t) in watcher.visible for f in range(n)), "every feed shows its warm-up", 900, nodes
            )
            start = time.monotonic() - started
            say(f"every feed shows its warm-up after {start:.1f} s; settling {args.settle} s")
            time.sleep(args.settle)
            say(f"idle window: {args.idle_seconds} s")
            idle_from, idle_cpu = time.monotonic(), cpu_seconds(nodes)
            time.sleep(args.idle_seconds)
            idle = (cpu_seconds(nodes) - idle_cpu) / (n * (time.monotonic() - idle_from) / 60)
            say(f"measured window: {args.seconds} s, a commit a second")
            cpu_before, measured_from, window = cpu_seconds(nodes), time.monotonic(), time.time()
            began = transactions(ports)
            committed: dict[int, float] = {}
            k, threads, python_threads = t, 0, 0
            while time.monotonic() - measured_from < args.seconds:
                threads = max(threads, *(_status(node.pid, "Threads") for node in nodes))
                python_threads = max(python_threads, *(_python_threads(node.pid) for node in nodes))
                write_deltalake(str(tables[k % t]), rows(k * ROWS, ROWS), mode="append")
                committed[k] = time.time()
                k += 1
                time.sleep(max(0.0, 1.0 - (time.time() - committed[k - 1])))
            cpu = cpu_seconds(nodes) - cpu_before
            minutes = (time.monotonic() - measured_from) / 60
            ended = transactions(ports)
            per_second = {k: (ended[k] - began.get(k, 0)) / (minutes * 60) for k in ended}
            last = max(committed.values())
            time.sleep(30)
            rss = max(_status(node.pid, "VmHWM") for node in nodes) / 1024
        finally:
            watcher.stop.set()
            for node in nodes:
                node.terminate()
            for node in nodes:
                node.wait(timeout=120)
            for log in logs:
                if log is not subprocess.DEVNULL:
                    log.close()
        read, shared = rows_read(store)
        went = phases(store, committed, watcher.visible, t)
    latencies = [
        watcher.visible[f, c] - at
        for c, at in committed.items()
        for f in range(n)
        if f % t == c % t and (f, c) in watcher.visible
    ]
    expected = sum(1 for c in committed for f in range(n) if f % t == c % t)
    lags = [sight - wall for feed in watcher.resolved.values() for sight, wall in feed if sight >= window] or [
        float("nan")
    ]
    behind = sum(1 for f in range(n) if not any(wall >= last for _, wall in watcher.resolved.get(f, [])))
    print(f"{len(latencies)} of {expected} (feed, commit) pairs seen; {len(lags)} resolved files")
    for phase, seconds in went.items():
        if seconds:
            print(
                f"{phase}: p50={percentile(seconds, 50):.2f} p90={percentile(seconds, 90):.2f} "
                f"p99={percentile(seconds, 99):.2f} s ({len(seconds)} pairs)"
            )
    print(
        f"feeds: N={n} T={t} nodes={args.nodes} start={start:.1f} s visible p50={percentile(latencies, 50):.2f} "
        f"p99={percentile(latencies, 99):.2f} s resolved lag p99={percentile(lags, 99):.2f} s behind={behind} "
        f"cpu={cpu / (n * minutes):.3f} s/feed-min idle={idle:.3f} s/feed-min rss={rss:.0f} MiB "
        f"tx/s={per_second.get('write', 0):.0f}w+{per_second.get('read', 0):.0f}r "
        f"read={read} shared={shared} threads={threads} python_threads={python_threads}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
