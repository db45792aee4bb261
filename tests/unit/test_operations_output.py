"""What people and machines read of a running node, without Spark: the docs site's lineage graph and page,
progress events in JSON every few seconds, and a node's gauges read from the state store."""

from __future__ import annotations

import json
import re

from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from feedctl.docs.lineage import lineage_svg
from feedctl.metrics.node_gauges import FeedOnNode, NodeGauges
from feedctl.reporting import Reporter
from feedctl.state import jobs, nodes, spans
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from support.jobs import definition

S = 1_000_000_000


def test_the_lineage_links_each_table_to_its_feeds_and_each_feed_to_its_sink():
    svg = lineage_svg(["s.users", "s.<odd>"], {"a": (["s.users", "s.<odd>"], "files"), "b": (["s.users"], None)})
    assert svg.count('class="node table"') == 2 and svg.count('class="node feed"') == 2
    assert svg.count('class="node sink"') == 1
    edges = re.findall(r'data-from="([^"]+)" data-to="([^"]+)"', svg)
    assert sorted(edges) == sorted([("s.users", "a"), ("s.&lt;odd&gt;", "a"), ("s.users", "b"), ("a", "files")])
    assert "<odd>" not in svg  # names are escaped


def test_json_progress_is_an_event_every_few_seconds_and_at_the_end(capsys, monkeypatch):
    now = [100.0]
    monkeypatch.setattr("feedctl.reporting.time.monotonic", lambda: now[0])
    reporter = Reporter("json")
    for second in range(12):
        now[0] = 100.0 + second
        reporter.log("p", event="progress", feed="f", batch=1, rows=second, rows_total=20, done=False)
    reporter.log("p", event="progress", feed="f", batch=1, rows=20, rows_total=20, done=True)
    reporter.log("b", event="batch", feed="f")
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["rows"] for e in events if e["event"] == "progress"] == [0, 5, 10, 20]
    assert events[-1]["event"] == "batch" and all(e["time"].endswith("Z") for e in events)


def test_text_progress_off_a_terminal_prints_nothing(capsys):
    reporter = Reporter("text")
    reporter.log("p", event="progress", feed="f", batch=1, rows=5, rows_total=20, done=False)
    reporter.log("f: batch 1 emitted", event="batch")
    assert re.fullmatch(r"[0-9]{2}:[0-9]{2}:[0-9]{2} f: batch 1 emitted\n", capsys.readouterr().out)


def test_a_nodes_gauges_per_scope(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)
    with store.transaction() as conn:
        labeled = jobs.create_job(
            conn, "a", "sha256:a", definition("s.t", metrics_label="rides"), "file://a", Hlc(10 * S), {"s.t": (0, 2)}
        )
        plain = jobs.create_job(conn, "b", "sha256:b", definition("s.t"), "file://b", Hlc(10 * S), {"s.t": (0, 3)})
        nodes.register(conn, "n1", "")
        for job in (labeled, plain):
            spans.ensure(conn, job.job_id, {"s.t": 2 if job is labeled else 3}, 0, Hlc(10 * S))
            for span in spans.of_job(conn, job.job_id)[:2]:
                spans.assign(conn, job.job_id, span, "n1", "any")
    registry = CollectorRegistry()
    registry.register(
        NodeGauges(
            store,
            "n1",
            lambda: [
                FeedOnNode(labeled.job_id, True, 3600.0),
                FeedOnNode(plain.job_id, False),
                FeedOnNode(None, False),
            ],
        )
    )
    samples = {
        (s.name, s.labels.get("scope") or s.labels["kind"]): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    # the store's transactions before the scrape read it: its tables made (a look, then a write), the one above
    assert samples[("feedctl_state_transactions_total", "write")] == 2
    assert samples[("feedctl_state_transactions_total", "read")] == 1
    assert samples[("changefeed_running", "rides")] == samples[("changefeed_running", "default")] == 1
    assert samples[("changefeed_backfill_count", "rides")] == 1
    assert samples[("changefeed_backfill_count", "default")] == 0
    assert samples[("changefeed_spans_held", "rides")] == 2 and samples[("changefeed_spans_held", "default")] == 2
    # No checkpoint yet: as far behind as the job's start, which was long ago.
    assert samples[("changefeed_max_behind_nanos", "rides")] > 1e18
    assert samples[("changefeed_checkpoint_progress", "rides")] == 10 * S
    # the history headroom where it is known (the job this node coordinates), and no figure where it is not
    assert samples[("changefeed_history_headroom_seconds", "rides")] == 3600.0
    assert ("changefeed_history_headroom_seconds", "default") not in samples


def test_the_grafana_dashboard_charts_only_metrics_a_node_serves():
    from pathlib import Path

    from feedctl.metrics.changefeed import REGISTRY
    from feedctl.metrics.node_gauges import _GAUGES, _HEADROOM

    dashboard = json.loads((Path(__file__).parents[2] / "ops/grafana/feedctl-changefeeds.json").read_text())
    served = (
        {s.name for family in REGISTRY.collect() for s in family.samples}
        | {f"{m.name}{suffix}" for m in REGISTRY.collect() for suffix in ("_total", "_bucket", "_count", "_sum")}
        | {f"changefeed_{name}" for name in _GAUGES}
        | {_HEADROOM[0]}
    )
    charted = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bchangefeed_[a-z_]+", target["expr"])
    }
    assert charted and charted <= served, charted - served
    assert {f"changefeed_{name}" for name in _GAUGES} | {_HEADROOM[0]} <= charted  # every gauge has its chart


def test_the_lineage_puts_each_feed_beside_its_tables_and_each_sink_beside_its_feeds():
    svg = lineage_svg(
        ["a.one", "a.three", "a.two"], {"x": (["a.two"], "s2"), "y": (["a.one"], "s1"), "z": (["a.three"], "s3")}
    )
    order = re.findall(r"<title>(\w+) ([\w.]+)</title>", svg)
    assert [n for k, n in order if k == "feed"] == ["y", "z", "x"]  # as their tables: one, three, two
    assert [n for k, n in order if k == "sink"] == ["s1", "s3", "s2"]
