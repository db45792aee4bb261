"""`feedctl nodes`: every node sharing the state store, whether it is live, and how many spans it emits of
each job. No Spark starts."""

from __future__ import annotations

from feedctl.project.loader import load_project
from feedctl.state import jobs, nodes, spans
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from support import Cli, json_lines
from support.e2e import file_sink, write_project
from support.jobs import definition


def test_each_node_shows_its_spans_per_job(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [
            {"name": "orders", "tables": ["s.orders"], "sink": "files"},
            {"name": "audit", "tables": ["s.orders"], "sink": "files"},
        ],
        [file_sink("files")],
    )
    store = StateStore.of_project(load_project(root)[0])
    ids = {}
    with store.transaction() as conn:
        for node_id, where in [("e1", "region=us-east1"), ("w1", "region=us-west1"), ("idle", "")]:
            nodes.register(conn, node_id, where, host=node_id)
        for feed, owners in [("orders", ["e1", "e1", "w1"]), ("audit", ["w1", "w1", "w1"])]:
            job = jobs.create_job(
                conn, feed, "sha256:x", definition("s.orders"), "file://x", Hlc(1), {"s.orders": (0, 0)}
            )
            ids[feed] = job.job_id
            spans.ensure(conn, job.job_id, {"s.orders": 3}, 0, Hlc(1))
            for span, owner in zip(spans.of_job(conn, job.job_id), owners):
                spans.assign(conn, job.job_id, span, owner, "any")
    records = {r["node_id"]: r for r in json_lines(Cli(root)("nodes", "--json").stdout)}
    orders, audit = ids["orders"], ids["audit"]
    assert {n: (r["spans_held"], r["spans_per_job"]) for n, r in records.items()} == {
        "e1": (2, [{"job_id": orders, "feed": "orders", "spans": 2}]),
        "w1": (
            4,
            sorted(
                [{"job_id": orders, "feed": "orders", "spans": 1}, {"job_id": audit, "feed": "audit", "spans": 3}],
                key=lambda j: j["job_id"],
            ),
        ),
        "idle": (0, []),
    }
    text = Cli(root)("nodes").stdout
    assert "orders: 2" in text and ("orders: 1, audit: 3" in text or "audit: 3, orders: 1" in text)
