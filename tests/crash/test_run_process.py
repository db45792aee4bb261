"""`feedctl run` as a real process: killed between emitting and checkpointing, and in --follow."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from deltalake import DeltaTable

from support import write_delta, write_files

FEEDCTL = str(Path(sys.executable).parent / "feedctl")


def _project(root: Path, options: str) -> Path:
    write_files(
        root,
        {
            "project.yml": (
                "name: shop\nconfig-version: 1\n"
                "spark: {master: 'local[2]', conf: {spark.sql.shuffle.partitions: '2'}}\n"
                "sources:\n  - name: shop\n    tables:\n"
                "      - {name: orders, path: target/warehouse/shop/orders, primary_key: [id], spans: 2}\n"
            ),
            "sinks/s.yml": "sinks:\n  - {name: files, uri: 'file://target/sink/orders', options: {file_size: 300}}\n",
            "feeds/f.yml": (
                f"feeds:\n  - name: orders\n    tables: [shop.orders]\n    sink: files\n    options: {options}\n"
            ),
        },
    )
    write_delta(
        root / "target/warehouse/shop/orders",
        {"id": "int64", "status": "string"},
        [{"id": i, "status": "open"} for i in range(20)],
    )
    return root


def _feedctl(root: Path, *args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
    return subprocess.run(
        [FEEDCTL, "--project-dir", str(root), *args], capture_output=True, text=True, env=full_env, timeout=600, **kw
    )


def _sink_files(root: Path) -> dict[str, str]:
    base = root / "target/sink/orders"
    return {
        str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def _job(root: Path) -> dict:
    [job] = [json.loads(line) for line in _feedctl(root, "jobs", "--json").stdout.splitlines()]
    return job


def test_a_crash_between_emitting_and_checkpointing_rewrites_the_same_files(tmp_path):
    root = _project(tmp_path / "p", "{updated: true, diff: true, initial_scan: 'no'}")
    first = _feedctl(root, "run")  # creates the job at the table's current version
    assert first.returncode == 0, first.stderr
    table = DeltaTable(str(root / "target/warehouse/shop/orders"))
    for i in range(0, 20, 3):
        table.update(predicate=f"id = {i}", new_values={"status": "shipped"})
    table.delete(predicate="id = 19")
    before = _job(root)

    crashed = _feedctl(root, "run", "--testing-kill-at", "after-emit")
    assert crashed.returncode == -signal.SIGKILL
    after_crash = _sink_files(root)
    assert after_crash, "the killed run had emitted its files"
    assert _job(root)["high_water_timestamp"] == before["high_water_timestamp"], "no checkpoint was written"

    rerun = _feedctl(root, "run")
    assert rerun.returncode == 0, rerun.stderr
    after_rerun = _sink_files(root)
    data = {n: h for n, h in after_crash.items() if not n.endswith(".RESOLVED")}
    assert {n: after_rerun[n] for n in data} == data, "the re-run rewrote the same names with the same bytes"
    assert [n for n in after_rerun if n not in after_crash and not n.endswith(".RESOLVED")] == []
    assert _job(root)["high_water_timestamp"] > (before["high_water_timestamp"] or "")

    messages = [
        json.loads(line)
        for n in after_rerun
        if not n.endswith(".RESOLVED")
        for line in (root / "target/sink/orders" / n).read_text().splitlines()
    ]
    assert sorted(m["key"][0] for m in messages) == sorted([*range(0, 20, 3), 19])
    assert len(data) > 1, "file_size: 300 rolled the batch over several files"


def test_a_crash_in_a_backfill_completes_it_with_the_same_files(tmp_path):
    """A column added with a value for every row (an overwrite with the new schema) is backfilled; the run
    killed once the backfill's files are written, before its checkpoint, writes them again byte for byte."""
    import pyarrow as pa
    from deltalake import write_deltalake

    root = _project(tmp_path / "p", "{updated: true, initial_scan: 'no'}")
    assert _feedctl(root, "run").returncode == 0
    path = str(root / "target/warehouse/shop/orders")
    for part in range(3):  # the backfill reads several data files, dealt out to the spans
        rows = pa.Table.from_pylist(
            [{"id": 100 + 10 * part + i, "status": "open"} for i in range(10)],
            schema=pa.schema(DeltaTable(path).schema().to_arrow()),
        )
        write_deltalake(path, rows, mode="append")
    assert _feedctl(root, "run").returncode == 0
    emitted = set(_sink_files(root))
    current = DeltaTable(path).to_pyarrow_table().to_pylist()
    write_deltalake(
        path, pa.Table.from_pylist([{**r, "tier": "basic"} for r in current]), mode="overwrite", schema_mode="overwrite"
    )

    crashed = _feedctl(root, "run", "--testing-kill-at", "after-emit")
    assert crashed.returncode == -signal.SIGKILL
    backfill = {n: h for n, h in _sink_files(root).items() if n not in emitted and not n.endswith(".RESOLVED")}
    assert backfill, "the killed run had written the backfill"
    rerun = _feedctl(root, "run")
    assert rerun.returncode == 0, rerun.stderr
    assert "(backfill)" in rerun.stderr + rerun.stdout
    after = _sink_files(root)
    assert {n: after[n] for n in backfill} == backfill, "the re-run rewrote the same names with the same bytes"
    assert [n for n in after if n not in emitted and n not in backfill and not n.endswith(".RESOLVED")] == []
    messages = [
        json.loads(line) for n in backfill for line in (root / "target/sink/orders" / n).read_text().splitlines()
    ]
    assert sorted(m["key"][0] for m in messages) == sorted(r["id"] for r in current)
    assert {m["after"]["tier"] for m in messages} == {"basic"}
    assert len({m["updated"] for m in messages}) == 1, "every row at the change's timestamp"
    verified = _feedctl(root, "verify", "orders")
    assert verified.returncode == 0, verified.stdout


def test_follow_advances_resolved_on_an_idle_table_and_stops_on_sigterm(tmp_path):
    root = _project(tmp_path / "p", "{resolved: 1s, min_checkpoint_frequency: 1s, initial_scan: 'no'}")
    proc = subprocess.Popen(
        [FEEDCTL, "--project-dir", str(root), "run", "--follow", "--poll-interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    try:
        resolved: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(resolved) < 3:
            time.sleep(0.5)
            resolved = sorted(n for n in _sink_files(root) if n.endswith(".RESOLVED"))
        assert len(resolved) >= 3, "resolved timestamps advance although nothing is committed"
        values = [json.loads((root / "target/sink/orders" / n).read_text())["resolved"] for n in resolved]
        assert values == sorted(values, key=lambda v: tuple(map(int, v.split("."))))
        newest_wall = int(values[-1].split(".")[0])
        assert time.time_ns() - newest_wall < 15e9, "close to now: the closed timestamp lags by seconds only"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


TOO = "sink: files_too\n    options: {initial_scan: 'no'"


def _two_feeds(root: Path, options: str) -> tuple[Path, Path]:
    """The project of `_project` with a second feed of the table, `orders_too`: (root, its feeds file)."""
    root = _project(root, options)
    feeds = root / "feeds/f.yml"
    feeds.write_text(feeds.read_text() + f"  - name: orders_too\n    tables: [shop.orders]\n    {TOO}}}\n")
    sinks = root / "sinks/s.yml"
    sinks.write_text(sinks.read_text() + "  - {name: files_too, uri: 'file://target/sink/orders_too'}\n")
    return root, feeds


def _follow(root: Path):
    """A `run --follow` node of the project, its JSON log lines gathered as they come."""
    import threading

    proc = subprocess.Popen(
        [FEEDCTL, "--project-dir", str(root), "--log-format", "json", "run", "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    lines: list[dict] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(line) for line in proc.stdout), daemon=True)
    reader.start()
    return proc, lines, reader


def test_follow_reports_a_refused_feed_at_once_and_on_its_job(tmp_path):
    """A feed a --follow node will not run (its definition changed under its job) is reported when the node
    starts, not when it stops, and `feedctl jobs` shows why its job no longer moves."""
    root, feeds = _two_feeds(tmp_path / "p", "{initial_scan: 'no'}")
    assert _feedctl(root, "run").returncode == 0  # both jobs, at the table's version
    feeds.write_text(feeds.read_text().replace(TOO, TOO + ", full_table_name: true"))
    proc, lines, reader = _follow(root)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(e.get("event") == "feed_refused" for e in lines):
            time.sleep(0.2)
        [refused] = [e for e in lines if e.get("event") == "feed_refused"]
        assert refused["feed"] == "orders_too" and "changed since its job" in refused["error"]
        assert proc.poll() is None, "said while the node runs its other feed"
        records = {
            json.loads(line)["feed"]: json.loads(line) for line in _feedctl(root, "jobs", "--json").stdout.splitlines()
        }
        assert records["orders_too"]["running_status"].startswith("refused by node ")
        assert "changed since its job" in records["orders_too"]["running_status"]
        assert not records["orders"]["running_status"].startswith("refused")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        reader.join(10)
    assert proc.returncode == 1  # a feed it did not run


def test_a_follow_node_takes_its_project_changing_under_it(tmp_path):
    """The project changes while a --follow node runs: an option the job takes in place is applied at once
    (the next change carries `before`); a definition its job cannot take stops that feed on the node with
    the reason in the log and in `feedctl jobs`, while the node's other feed runs on; a table added to a
    feed is followed from then on, the feed's runner starting again on the node to take it."""
    root, feeds = _two_feeds(tmp_path / "p", "{initial_scan: 'no', updated: true}")
    proc, lines, reader = _follow(root)

    def wait_for(what, seconds=180):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and proc.poll() is None:
            found = [e for e in lines if what(e)]
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"not seen in {seconds} s: {[e.get('message') for e in lines]}")

    def updates():
        base = root / "target/sink/orders"
        return [json.loads(line) for p in sorted(base.rglob("*.ndjson")) for line in p.read_text().splitlines()]

    try:
        wait_for(lambda e: e.get("event") == "job_created" and e.get("feed") == "orders_too")
        table = DeltaTable(str(root / "target/warehouse/shop/orders"))
        table.update(predicate="id = 1", new_values={"status": "shipped"})
        wait_for(lambda e: e.get("event") == "batch" and e.get("feed") == "orders" and e.get("messages"))
        assert [("before" in m, m["key"]) for m in updates()] == [(False, [1])]

        text = feeds.read_text()
        feeds.write_text(
            text.replace(
                "{initial_scan: 'no', updated: true}", "{initial_scan: 'no', updated: true, diff: true}"
            ).replace(TOO, TOO + ", full_table_name: true")
        )
        [changed] = wait_for(lambda e: e.get("event") == "options_changed")
        assert changed["feed"] == "orders" and changed["options"] == {"diff": True}
        [refused] = wait_for(lambda e: e.get("event") == "feed_refused")
        assert refused["feed"] == "orders_too" and "changed since its job" in refused["error"]

        table.update(predicate="id = 2", new_values={"status": "shipped"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(updates()) < 2:
            time.sleep(0.2)
        assert [("before" in m, m["key"]) for m in updates()] == [(False, [1]), (True, [2])]
        assert updates()[-1]["before"]["status"] == "open"
        assert proc.poll() is None, "the node runs on"
        records = {
            json.loads(line)["feed"]: json.loads(line) for line in _feedctl(root, "jobs", "--json").stdout.splitlines()
        }
        assert "changed since its job" in records["orders_too"]["running_status"]

        write_delta(
            root / "target/warehouse/shop/customers",
            {"id": "int64", "status": "string"},
            [{"id": 100, "status": "new"}],
        )
        project = root / "project.yml"
        project.write_text(
            project.read_text() + "      - {name: customers, path: target/warehouse/shop/customers, "
            "primary_key: [id]}\n"
        )
        feeds.write_text(
            feeds.read_text().replace(
                "tables: [shop.orders]\n    sink: files\n", "tables: [shop.orders, shop.customers]\n    sink: files\n"
            )
        )
        wait_for(lambda e: e.get("event") == "table_added" and e.get("table") == "shop.customers")
        wait_for(lambda e: e.get("event") == "rejoin" and e.get("feed") == "orders")
        DeltaTable(str(root / "target/warehouse/shop/customers")).update(
            predicate="id = 100", new_values={"status": "gold"}
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(updates()) < 3:
            time.sleep(0.2)
        assert [(m["key"], m["after"]["status"]) for m in updates()][2:] == [([100], "gold")]
        assert proc.poll() is None, "the node runs on"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    done = _feedctl(root, "verify", "orders")
    assert done.returncode == 0, done.stdout
