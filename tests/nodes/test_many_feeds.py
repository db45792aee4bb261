"""Many feeds on two nodes: 50 feeds over two tables (plain feeds and CDC queries, into folders of their own
and one into a webhook) on two `--follow` nodes while commits land. The webhook away for a while holds back
its own feed alone: every other feed resolves past the commits made meanwhile, and the webhook's feed
catches up once it is back. `feedctl verify` is clean on every feed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from feedctl.testing import devservers
from feedctl.testing.nemesis.harness import Runner
from support import Cli
from support.nodes import records, verify_all, wait_for
from support.projects import json_lines

FEEDS = 50
HOOKED = "f0"  # the feed whose sink goes away
QUERIED = {f"f{i}" for i in range(FEEDS) if i % 5 == 4}  # a CDC query each


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [f"v{i}" for i in range(n)]})


def write_project(root: Path, tables: list[Path], hook: str) -> None:
    (root / "feeds").mkdir(parents=True)
    (root / "sinks").mkdir()
    project = {
        "name": "many",
        "config-version": 1,
        "state": "sqlite:///target/state.db",
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
        "sources": [{"name": "s", "tables": [{"name": t.name, "path": str(t), "primary_key": ["id"]} for t in tables]}],
    }
    (root / "project.yml").write_text(json.dumps(project))
    options = {"resolved": "1s", "min_checkpoint_frequency": "1s", "updated": True}
    feeds = []
    for i in range(FEEDS):
        name, table = f"f{i}", tables[i % len(tables)].name
        feed = {"name": name, "sink": name, "options": options}
        if name in QUERIED:
            (root / "feeds" / f"{name}.sql").write_text(
                f"SELECT id, upper(v) AS v FROM {{{{ source('s', '{table}') }}}} WHERE id % 2 = 0"
            )
            feed["query"] = f"{name}.sql"
        else:
            feed["tables"] = [f"s.{table}"]
        feeds.append(feed)
    (root / "feeds" / "f.yml").write_text(json.dumps({"feeds": feeds}))
    sinks = [{"name": f"f{i}", "uri": f"file://{root / 'out' / f'f{i}'}"} for i in range(1, FEEDS)]
    sinks.append({"name": HOOKED, "uri": hook})
    (root / "sinks" / "s.yml").write_text(json.dumps({"sinks": sinks}))


def commit(tables: list[Path], k: int) -> int:
    """Commit k: rows appended to one table and, every third, a row of the other deleted; its time (ns)."""
    write_deltalake(str(tables[k % 2]), rows(100 + 10 * k, 10), mode="append")
    if k % 3 == 0:
        DeltaTable(str(tables[(k + 1) % 2])).delete(f"id = {k % 20}")
    return time.time_ns()


def resolved(root: Path) -> dict[str, int]:
    """Each running job's resolved timestamp (wall ns)."""
    return {
        j["feed"]: int((j["resolved_timestamp"] or "0").split(".")[0])
        for j in records(root, "jobs")
        if j["status"] == "running"
    }


def test_a_sink_away_holds_back_its_own_feed_alone_among_fifty_on_two_nodes(tmp_path):
    tables = [tmp_path / "t0", tmp_path / "t1"]
    for table in tables:
        write_deltalake(str(table), rows(0, 20), configuration={"delta.enableChangeDataFeed": "true"})
    hook_folder = tmp_path / "hook"
    hook = devservers.webhook(folder=hook_folder)
    root = tmp_path / "project"
    write_project(root, tables, hook.env["WEBHOOK_URL"].replace("http://", "webhook-http://"))
    assert Cli(root)("compile").exit_code == 0
    nodes = [Runner(root, root / f"n{i}.log", poll_interval=0.5, node_id=f"n{i}") for i in range(2)]
    try:
        last = max(commit(tables, k) for k in range(4))
        wait_for(
            lambda: (r := resolved(root)) and len(r) == FEEDS and min(r.values()) > last,
            "every feed resolves past the first commits",
            timeout=300,
        )

        hook.stop()  # the webhook's feed cannot deliver; the others go on
        first = commit(tables, 4)
        last = max([first, *(commit(tables, k) for k in range(5, 8))])
        wait_for(
            lambda: all(ts > last for feed, ts in resolved(root).items() if feed != HOOKED),
            "every other feed resolves past the commits made while the webhook is away",
            timeout=120,
        )
        assert resolved(root)[HOOKED] < first, "the webhook's feed cannot resolve past what it could not deliver"

        hook = devservers.webhook(hook.port, hook_folder)
        wait_for(lambda: resolved(root).get(HOOKED, 0) > last, "the webhook's feed catches up", timeout=120)
        statuses = {j["feed"]: j["status"] for j in records(root, "jobs")}
        assert set(statuses.values()) == {"running"}, statuses
    finally:
        codes = [node.stop() for node in nodes]
        hook.stop()
    assert codes == [0, 0], [(root / f"n{i}.log").read_text()[-3000:] for i in range(2)]
    reports = verify_all(root, [f"f{i}" for i in range(FEEDS) if f"f{i}" != HOOKED])
    hooked = Cli(root)("verify", HOOKED, "--json", "--capture", str(hook_folder / "capture.ndjson"))
    assert hooked.exit_code == 0, hooked.output
    reports += json_lines(hooked.stdout)
    assert len(reports) == FEEDS and all(r["ok"] for r in reports), [r for r in reports if not r["ok"]]
