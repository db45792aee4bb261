"""A feed's contract version raised: `feedctl run` starts the new version's job into a location of its own
(a `v2/` folder), scanning its tables, while the old version's job runs on into its folder from its own
definition, until it is canceled. Each verifies clean."""

from __future__ import annotations

import threading

from feedctl.commands.run import run_feeds
from feedctl.node.settings import RunSettings
from support import Cli
from support.e2e import Table, assert_verified, file_sink, read_sink, run, sink_dir, write_feeds, write_project
from support.nodes import wait_for
from support.projects import json_lines

COLUMNS = {"id": "int64", "region": "string", "amount": "int64"}


def _feeds(version: int) -> list[dict]:
    return [
        {
            "name": "orders",
            "query": "orders.sql",
            "sink": "out",
            "options": {"updated": True},
            "contract": {"enforced": True},
            "version": version,
        }
    ]


def _messages(root, version_folder: str | None) -> list[dict]:
    """The messages one version's consumer reads: the folder's own files, or those of its `vN/` folder."""
    files = read_sink(sink_dir(root, "out") / version_folder if version_folder else sink_dir(root, "out"))
    if version_folder is None:
        files = [f for f in files if not f.name.startswith("v2/")]
    return [m for f in files if not f.resolved for m in f.lines]


def test_a_new_contract_version_runs_beside_the_old_one_until_it_is_canceled(tmp_path):
    t = Table(tmp_path / "data" / "orders", COLUMNS, ["id"], [{"id": i, "region": "eu", "amount": i} for i in (1, 2)])
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": str(t.path), "primary_key": ["id"]}},
        _feeds(1),
        [file_sink("out")],
        files={"feeds/orders.sql": "SELECT id, region, amount FROM {{ source('s', 'orders') }}\n"},
    )
    cli = Cli(root)
    assert run(root)["orders"].messages == 2

    # the breaking change, versioned: amount is no longer emitted
    (root / "feeds/orders.sql").write_text("SELECT id, region FROM {{ source('s', 'orders') }}\n")
    write_feeds(root, _feeds(2))
    t.update("id = 1", amount="10")
    t.append([{"id": 3, "region": "us", "amount": 3}])
    reports = run(root)
    assert set(reports) == {"orders", "orders@v2"}
    [v1, v2] = sorted(json_lines(cli("jobs", "--json").stdout), key=lambda j: j["version"])
    assert (v1["version"], v1["status"], v1["sink_uri"]) == (1, "running", "file://target/sink/out")
    assert (v2["version"], v2["status"], v2["sink_uri"]) == (2, "running", "file://target/sink/out/v2")
    assert "orders@v2" in cli("jobs").output
    planned = cli("plan").output  # the old version kept alive is in the reviewer's sight
    assert "orders: unchanged" in planned
    assert f"version 1: job {v1['job_id']} runs on into file://target/sink/out until canceled" in planned

    # version 1 emitted the changes as it always did; version 2 scanned the table, without amount
    assert sorted((m["id"], m["amount"]) for m in _messages(root, None)) == [(1, 1), (1, 10), (2, 2), (3, 3)]
    assert sorted((m["id"], m["region"]) for m in _messages(root, "v2")) == [(1, "eu"), (2, "eu"), (3, "us")]
    assert all("amount" not in m for m in _messages(root, "v2"))
    assert_verified(root, "orders")  # the newest job: version 2's
    verified = cli("verify", "orders", "--job", str(v1["job_id"]))
    assert verified.exit_code == 0, verified.output

    # removed: canceled, version 1's job runs no more, and its folder takes nothing new
    assert cli("cancel", "orders@v1").exit_code == 0
    t.delete("id = 2")
    reports = run(root)
    assert set(reports) == {"orders@v2"} and reports["orders@v2"].messages == 1
    assert len(_messages(root, None)) == 4
    assert_verified(root, "orders")


def test_a_follow_node_takes_a_new_version_beside_the_old_one_as_its_project_changes(tmp_path):
    """The version raised under a running `--follow` node: the node starts the new version's job and runs the
    old one on, each emitting the commits that follow into its own folder; the old one canceled, it stops.
    (Plain feeds of few changes: the node writes them itself, without Spark.)"""
    t = Table(tmp_path / "data" / "orders", COLUMNS, ["id"], [{"id": 1, "region": "eu", "amount": 1}])
    feed = {"name": "orders", "tables": ["s.orders"], "sink": "out", "options": {"updated": True, "initial_scan": "no"}}
    root = write_project(
        tmp_path / "p", {"orders": {"path": str(t.path), "primary_key": ["id"]}}, [feed], [file_sink("out")]
    )
    stop, events, reports = threading.Event(), [], []
    settings = RunSettings(follow=True, poll_interval=0.1, closed_lag=0.1, node_id="n1")
    node = threading.Thread(
        target=lambda: reports.extend(
            run_feeds(root, settings=settings, stop=stop, log=lambda m, **f: events.append(f))
        )
    )
    node.start()
    try:

        def emitted(folder: str | None, key: int) -> bool:
            return any(m["key"] == [key] for m in _messages(root, folder))

        wait_for(lambda: any(e.get("event") == "job_created" for e in events), "the job is made", 60)
        t.append([{"id": 2, "region": "eu", "amount": 2}])
        wait_for(lambda: emitted(None, 2), "version 1 emits a commit", 60)

        write_feeds(root, [{**feed, "version": 2}])
        wait_for(
            lambda: any(e.get("event") == "job_created" and e.get("version") == 2 for e in events),
            "the node makes the job of version 2",
            60,
        )
        t.append([{"id": 3, "region": "us", "amount": 3}])
        wait_for(lambda: emitted(None, 3) and emitted("v2", 3), "both versions emit the next commit", 60)

        assert Cli(root)("cancel", "orders@v1").exit_code == 0
        t.append([{"id": 4, "region": "us", "amount": 4}])
        wait_for(lambda: emitted("v2", 4), "version 2 emits on alone", 60)
        assert not emitted(None, 4)
        wait_for(
            lambda: not any(t.name == "feed-orders" for t in threading.enumerate()),
            "the node stops running version 1",
            60,
        )
    finally:
        stop.set()
        node.join()
    assert not any(e.get("event") == "feed_refused" for e in events), events
    assert {r.feed: r.status for r in reports} == {"orders": "canceled", "orders@v2": "running"}
