"""What `feedctl run` refuses before it starts anything (options it cannot honour yet: no job is created),
what a runner outside a feed's execution_locality does with its job, and when a --follow node runs a feed
again, and the order it starts its feeds in. No Spark starts."""

from __future__ import annotations

import pytest

from feedctl.commands.jobs import JOB_FIELDS
from feedctl.coordinator.locality import matches as locality_matches
from feedctl.node.supervisor import runs_again
from feedctl.node.supervisor import turn as _turn
from feedctl.project.loader import load_project
from feedctl.state import jobs, nodes
from feedctl.state.store import StateStore
from support import Cli, json_lines, write_delta
from support.e2e import file_sink, write_project
from support.jobs import stored_job


def _project(tmp_path, options: dict):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "orders", "tables": ["s.orders"], "sink": "files", "options": options}],
        [file_sink("files")],
    )
    write_delta(root / "target/warehouse/s/orders", {"id": "int64"}, [{"id": 1}])
    return root


@pytest.mark.parametrize(
    ("options", "note"),
    [({"format": "avro", "envelope": "bare"}, "format: avro is written with envelope: wrapped only")],
)
def test_options_a_run_cannot_honour_yet_are_refused(tmp_path, options, note):
    root = _project(tmp_path, options)
    result = Cli(root)("run", json_logs=True)
    assert result.exit_code == 1
    [done] = [e for e in json_lines(result.stdout) if e.get("event") == "feed_done"]
    assert done["status"] == "error" and note in done["note"]
    assert json_lines(Cli(root)("jobs", "--json").stdout) == []


def test_a_job_no_live_node_matches_fails_after_the_grace_period_naming_the_filter(tmp_path):
    root = _project(tmp_path, {"execution_locality": "region=us-east1"})
    result = Cli(root)("run", "--locality", "region=europe-west1,zone=b", "--locality-grace", "0.5", json_logs=True)
    assert result.exit_code == 1, result.output
    [done] = [e for e in json_lines(result.stdout) if e.get("event") == "feed_done"]
    assert done["status"] == "failed"
    assert done["note"] == "no live node matches execution_locality region=us-east1"
    [job] = json_lines(Cli(root)("jobs", "--json").stdout)
    assert (job["status"], job["error"]) == ("failed", "no live node matches execution_locality region=us-east1")
    assert set(job) == set(JOB_FIELDS)  # every field the manual's reference describes, and no other
    assert Cli(root)("run", "--locality", "region").exit_code == 2


def test_a_node_outside_the_filter_hands_the_job_to_the_matching_node_closest_to_it(tmp_path):
    root = _project(tmp_path, {"execution_locality": "zone=b"})
    store = StateStore.of_project(load_project(root)[0])
    with store.transaction() as conn:  # two live nodes match; the one in this node's region gets the job
        for node_id, where in [("a-europe", "region=europe-west1,zone=b"), ("z-east", "region=us-east1,zone=b")]:
            nodes.register(conn, node_id, where, host=node_id, feeds=("orders",))
    result = Cli(root)("run", "--locality", "region=us-east1,zone=a", json_logs=True)
    assert result.exit_code == 0, result.output
    [handed] = [e for e in json_lines(result.stdout) if e.get("event") == "handed_over"]
    assert handed["node"] == "z-east"
    [job] = json_lines(Cli(root)("jobs", "--json").stdout)
    assert (job["status"], job["coordinator"]) == ("running", "z-east")
    again = Cli(root)("run", "--locality", "region=us-east1,zone=a", json_logs=True)  # z-east has it: no move
    assert not [e for e in json_lines(again.stdout) if e.get("event") == "handed_over"]
    [done] = [e for e in json_lines(again.stdout) if e.get("event") == "feed_done"]
    assert "coordinated by z-east" in done["note"]


def test_locality_tiers_match_as_a_subset():
    assert locality_matches("region=us-east1", "region=us-east1,zone=a")
    assert locality_matches("region=us-east1,zone=a", "zone=a,region=us-east1")
    assert not locality_matches("region=us-east1,zone=a", "region=us-east1")
    assert not locality_matches("region=us-east1", "")


def test_a_changed_primary_key_under_a_cdc_query_is_refused_naming_both_keys(tmp_path):
    """A key change is a schema change for a feed of tables (tests/spark/test_schema_changes.py); not yet
    under a CDC query, whose job is refused rather than run with a different key."""
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "orders", "query": "orders.sql", "sink": "files", "options": {"initial_scan": "no"}}],
        [file_sink("files")],
        files={"feeds/orders.sql": "SELECT id, region FROM {{ source('s', 'orders') }}\n"},
    )
    write_delta(root / "target/warehouse/s/orders", {"id": "int64", "region": "string"}, [{"id": 1, "region": "a"}])
    assert Cli(root)("run").exit_code == 0  # the job, at the table's version: nothing to emit
    project = (root / "project.yml").read_text()
    (root / "project.yml").write_text(
        project.replace("primary_key:\n    - id", "primary_key: [region, id]\n    region_column: region")
    )
    result = Cli(root)("run", json_logs=True)
    assert result.exit_code == 1
    [done] = [e for e in json_lines(result.stdout) if e.get("event") == "feed_done"]
    assert "the primary key or region column of s.orders changed" in done["note"], done["note"]
    assert "([id] → [region, id], region column region)" in done["note"]
    assert "under a CDC query is not yet taken as a schema change" in done["note"]
    [job] = json_lines(Cli(root)("jobs", "--json").stdout)
    assert job["status"] == "running"


def _newest(job_id: int, status: str) -> jobs.Job:
    return stored_job(job_id, status)


def test_a_node_runs_a_resumed_job_again_however_its_run_saw_the_job_end():
    """The run may end as its coordinator thread sees the pause, before the node reads the job's status: it
    then reports the job as running, and the node must still take its part once the job is resumed (its
    spans stood still)."""
    assert not runs_again(_newest(7, "paused"), 7, refused=False, copy_changed=False)
    assert runs_again(_newest(7, "running"), 7, refused=False, copy_changed=False)


def test_a_node_that_refused_a_job_waits_for_another_copy_or_another_job():
    assert not runs_again(_newest(7, "running"), 7, refused=True, copy_changed=False)
    assert runs_again(_newest(7, "running"), 7, refused=True, copy_changed=True)
    assert runs_again(_newest(8, "running"), 7, refused=True, copy_changed=False)
    assert not runs_again(_newest(8, "failed"), 7, refused=True, copy_changed=True)
    assert not runs_again(None, None, refused=True, copy_changed=False)
    assert runs_again(None, None, refused=True, copy_changed=True)


@pytest.mark.parametrize(
    "failed, said",
    [
        ("locked", "database is locked"),
        ("no connection", "QueuePool limit"),  # a server's connections all taken for 30 s
    ],
)
def test_a_run_the_store_failed_as_it_started_runs_again_at_the_next_poll(failed, said):
    """Many feeds starting at once can meet a busy store: the feed is run again, not left unrun."""
    import sqlite3
    import threading
    from types import SimpleNamespace

    from sqlalchemy.exc import OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from feedctl.coordinator.store_outage import StoreOutage
    from feedctl.coordinator.wait import drive
    from feedctl.node.settings import RunOutcome
    from feedctl.node.supervisor import run_one as _run_one
    from feedctl.node.supervisor import wait_for_work as _wait_for_work

    class Starting:
        feed = SimpleNamespace(name="orders", version=1)
        label = "orders"
        left_version = False

        def runs(self):  # a run's steps, failing at its first
            if failed == "locked":
                raise OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))
            raise PoolTimeout("QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00")
            yield

    report = _run_one(Starting())
    assert report.status == RunOutcome.STORE_UNAVAILABLE and said in report.error
    outage = StoreOutage(lambda message, **fields: None, 0.01, 0.05)
    assert drive(_wait_for_work(None, Starting(), report, threading.Event(), 10, outage)), (
        "the store's wait, not a poll"
    )
    stopped = threading.Event()
    stopped.set()
    assert not drive(_wait_for_work(None, Starting(), report, stopped, 0.01, outage)), "not once the node stops"


def test_a_store_step_between_runs_is_tried_again_until_it_succeeds_or_the_node_stops():
    """A --follow node's store steps between a feed's runs (releasing its spans, waiting for work, taking the
    feed up again) met the pool's timeout as 500 feeds started at once: the feed's steps ended, and the node
    never ran the feed. They are tried again, saying so, until they succeed or the node stops."""
    import threading

    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from feedctl.coordinator.store_outage import StoreOutage
    from feedctl.coordinator.wait import drive
    from feedctl.node.supervisor import store_step as _store_step

    said, calls = [], []

    def step():
        calls.append(1)
        if len(calls) < 3:
            raise PoolTimeout("QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00")
        return "done"

    log = lambda message, **fields: said.append((message, fields.get("event")))  # noqa: E731
    outage = StoreOutage(log, 0.01, 0.05)
    assert drive(_store_step(step, "orders", threading.Event(), outage)) == "done"
    assert len(calls) == 3
    assert said == [
        (
            "the state store failed (QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout "
            "30.00); every feed of this node waits and tries again until it works",
            "store_away",
        ),
        ("the state store works again after 0s", "store_back"),
    ]

    def failing():
        raise PoolTimeout("no connection")

    stopped = threading.Event()
    stopped.set()
    assert drive(_store_step(failing, "orders", stopped, outage)) is None, "not once the node stops"

    def broken():
        raise ValueError("not the store")

    with pytest.raises(ValueError):
        drive(_store_step(broken, "orders", threading.Event(), outage))


def test_nodes_start_their_feeds_in_orders_of_their_own_each_reaching_other_feeds_first():
    """A --follow node starts its feeds a few at a time; three nodes starting 1,000 feeds each reach a
    different share of them first, rather than all racing to make and claim the same feed's job."""
    labels = [f"f{i}" for i in range(1000)]
    firsts = [set(sorted(labels, key=lambda label: _turn(node, label))[:100]) for node in ("n0", "n1", "n2")]
    # in one shared order, each pair would share all 100; in independent orders, about 10
    assert all(len(a & b) < 30 for i, a in enumerate(firsts) for b in firsts[i + 1 :])
