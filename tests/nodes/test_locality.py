"""Four nodes in three regions over the demo, as CockroachDB places changefeed work: each span goes to the
nodes of its home (a regional-by-row table's spans: their region's nodes), a span without a live replica to
the nodes sharing the most locality tiers with its home, a feed with `execution_locality` only to matching
nodes. A node outside a job's filter hands it over at once; a filter no node matches fails its job after the
grace period, naming it. The europe node is killed while the workload moves vehicles between regions, and a
region appears later; `feedctl verify` is clean on every feed."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from feedctl.project.loader import load_project
from feedctl.testing.nemesis.harness import Runner, Workload
from feedctl.workload.movr import SCHEMAS
from support import Cli
from support.nodes import records, status, verify_all, wait_for

NODES = {
    "e1a": "region=us-east1,zone=a",
    "e1b": "region=us-east1,zone=b",
    "w1": "region=us-west1,zone=a",
    "eu": "region=europe-west1,zone=a",
}
EAST = {"e1a", "e1b"}
REGION_NODES = {"region=us-east1": EAST, "region=us-west1": {"w1"}, "region=europe-west1": {"eu"}}
FEEDS = {"movr_all", "vehicles_in_use", "ride_ends", "zone_a_rides"}
ZONE_A_FEED = """
  - name: zone_a_rides
    tables: [movr.rides]
    sink: zone_a_files
    options: {updated: true, resolved: 10s, execution_locality: zone=a}
"""
NOWHERE_FEED = """
  - name: nowhere
    tables: [movr.users]
    sink: zone_a_files
    options: {execution_locality: region=asia-east1}
"""


def prepare(root) -> None:
    """The demo, users pinned to a zone no node is in (its spans go to the closest node), and a feed pinned
    to zone a."""
    assert Cli(root)("workload", "init", "movr").exit_code == 0
    project = root / "project.yml"
    text = project.read_text()
    project.write_text(
        text.replace(
            "primary_key: [city, id]\n        locality: region=us-east1\n      - name: vehicles",
            "primary_key: [city, id]\n        locality: region=us-west1,zone=b\n      - name: vehicles",
            1,
        )
    )
    assert "region=us-west1,zone=b" in project.read_text()
    with open(root / "feeds" / "movr.yml", "a") as feeds:
        feeds.write(ZONE_A_FEED)
    with open(root / "sinks" / "local.yml", "a") as sinks:
        sinks.write("  - name: zone_a_files\n    uri: file://target/sink/zone_a\n")


def job(root, feed: str) -> dict | None:
    return next((j for j in records(root, "jobs") if j["feed"] == feed), None)


def live(root) -> set[str]:
    return {n["node_id"] for n in records(root, "nodes") if n["live"]}


def at_home(record: dict) -> bool:
    """Every span of movr_all on a node of its home, or for users (no node in its zone) on the node sharing
    its region."""
    for s in record["spans"]:
        if s["moving_to"]:
            return False
        if s["table"] == "movr.users":
            if (s["node"], s["reason"]) != ("w1", "closest"):
                return False
        elif s["node"] not in REGION_NODES[s["home"]] or s["reason"] != "home":
            return False
    return True


# Several hosts in several regions share a PostgreSQL store; how each store places regional spans and hands
# jobs over is held on both in unit/test_state_stores.py and unit/test_coordinator_state.py.
@pytest.mark.parametrize("demo_project", ["postgresql"], indirect=True)
def test_spans_run_in_their_region_and_execution_locality_pins_jobs(demo_project):
    root = demo_project
    prepare(root)
    nodes = {"e1b": Runner(root, root / "e1b.log", poll_interval=0.5, node_id="e1b", locality=NODES["e1b"])}
    workload = Workload(load_project(root)[0], 600, 5, seed=3)
    try:
        # alone, e1b runs every feed but zone_a_rides, whose job waits for a node in zone a
        wait_for(
            lambda: (j := job(root, "zone_a_rides")) and not j["coordinator_live"] and job(root, "movr_all"),
            "e1b has created every job",
        )
        nodes["e1a"] = Runner(root, root / "e1a.log", poll_interval=0.5, node_id="e1a", locality=NODES["e1a"])
        wait_for(lambda: "e1a" in live(root), "e1a is live")
        joined = time.monotonic()
        wait_for(lambda: job(root, "zone_a_rides")["coordinator"] == "e1a", "zone_a_rides is handed to e1a", 60)
        print(f"zone_a_rides coordinated by e1a {time.monotonic() - joined:.1f} s after it was live")
        handed = [
            line
            for line in (root / "e1b.log").read_text().splitlines()
            if "zone_a_rides: job" in line and "handed to" in line
        ]
        assert all("handed to e1a," in line for line in handed), handed
        print(f"e1b handed zone_a_rides over: {bool(handed)}")

        for name in ("w1", "eu"):
            nodes[name] = Runner(root, root / f"{name}.log", poll_interval=0.5, node_id=name, locality=NODES[name])
        placed = wait_for(
            lambda: (r := status(root)) and at_home(r) and len({s["node"] for s in r["spans"]}) == 4 and r,
            "movr_all's spans are on their home nodes",
        )
        vehicles = {s["span"]: s for s in placed["spans"] if s["table"] == "movr.vehicles"}
        assert sorted(s["home"] for s in vehicles.values()) == sorted(2 * list(REGION_NODES)), "2 spans per region"

        pinned = wait_for(
            lambda: (
                (r := status(root, "vehicles_in_use"))
                and r["spans"]
                and not any(s["moving_to"] for s in r["spans"])
                and r
            ),
            "vehicles_in_use is placed",
        )
        assert pinned["coordinator"] in EAST and {s["node"] for s in pinned["spans"]} <= EAST

        workload.start()

        def emitted_from_home():
            spans = {s["span"]: s for s in status(root)["spans"] if s["table"] == "movr.vehicles"}
            assert all(spans[n]["node"] == vehicles[n]["node"] for n in vehicles), "a vehicles span moved"
            return all(spans[n]["batch"] > vehicles[n]["batch"] + 1 for n in vehicles)

        wait_for(emitted_from_home, "every region's vehicles spans emit batches from their region's nodes")

        nodes["eu"].kill()
        europe = {(s["table"], s["span"]) for s in placed["spans"] if s["node"] == "eu"}

        def europe_moved():
            spans = {(s["table"], s["span"]): s for s in status(root)["spans"]}
            return all(spans[k]["node"] in ("e1a", "e1b", "w1") for k in europe) and spans

        after = wait_for(europe_moved, "the europe node's spans are placed again")
        for k in europe:  # no live node shares a tier with region=europe-west1
            assert (after[k]["reason"], after[k]["note"]) == ("any", "eu is not live")
        assert all(
            s["node"] == after[k]["node"] for s in placed["spans"] if (k := (s["table"], s["span"])) not in europe
        )

        workload.stop.set()
        workload.join()
        assert workload.error is None and workload.commits > 0
        # a region no vehicle was in: its rows get spans of their own
        vehicle = {name: None for name in SCHEMAS["vehicles"].names} | {
            "crdb_region": "asia-east1",
            "id": "asia-1",
            "city": "tokyo",
            "status": "available",
            "creation_time": datetime.now(timezone.utc),
            "current_battery": 90,
        }
        write_deltalake(
            str(root / "target/warehouse/movr/vehicles"),
            pa.Table.from_pylist([vehicle], schema=SCHEMAS["vehicles"]),
            mode="append",
        )
        committed = time.time_ns()

        def passed(feed):
            mark = job(root, feed)["high_water_timestamp"]
            return mark and int(mark.split(".")[0]) > committed

        wait_for(lambda: all(passed(feed) for feed in FEEDS - {"ride_ends"}), "every job passes the last commit")
        asia = [s for s in status(root)["spans"] if s["home"] == "region=asia-east1"]
        assert len(asia) == 2 and {s["reason"] for s in asia} == {"any"} and all(s["batch"] > 0 for s in asia)

        # a one-off node outside a filter no live node matches waits the grace period, then fails the job
        with open(root / "feeds" / "movr.yml", "a") as feeds:
            feeds.write(NOWHERE_FEED)
        began = time.monotonic()
        result = Cli(root)(
            "run", "-s", "nowhere", "--node-id", "probe", "--locality", NODES["e1a"], "--locality-grace", "3"
        )
        waited = time.monotonic() - began
        assert result.exit_code == 1, result.output
        assert job(root, "nowhere")["status"] == "failed"
        assert job(root, "nowhere")["error"] == "no live node matches execution_locality region=asia-east1"
        assert 3 <= waited < 35, waited
    finally:
        workload.stop.set()
        codes = {name: node.stop() for name, node in nodes.items()}
    assert {name: code for name, code in codes.items() if name != "eu"} == {"e1a": 0, "e1b": 0, "w1": 0}
    verify_all(root, FEEDS)
