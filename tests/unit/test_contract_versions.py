"""Where a feed's later contract version emits: a location of its own beside the first version's, whatever
the kind of sink, and never read as part of the first version's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from feedctl.errors import RunError
from feedctl.job.definition import definition_of
from feedctl.job.earlier_version import as_compiled
from feedctl.project.loader import load_project
from feedctl.sinks.registry import open_sink
from feedctl.sinks.versioned import at_version, located
from feedctl.state.jobs import Job, stored
from feedctl.units import Hlc
from feedctl.verify.across_jobs import gaps
from support.e2e import write_project
from support.jobs import definition, stored_job


@pytest.mark.parametrize(
    "uri, at_v2",
    [
        ("file://target/sink/orders", "file://target/sink/orders/v2"),
        ("file:///data/orders/", "file:///data/orders/v2"),
        ("s3://bucket?AWS_ENDPOINT=http://127.0.0.1:5000", "s3://bucket/v2?AWS_ENDPOINT=http://127.0.0.1:5000"),
        (
            "webhook-https://127.0.0.1:8443/hooks/orders?ca_cert=x",
            "webhook-https://127.0.0.1:8443/hooks/orders/v2?ca_cert=x",
        ),
    ],
)
def test_a_later_version_of_a_folder_or_a_webhook_gets_a_path_of_its_own(uri, at_v2):
    assert located(uri, {}, 1) == (uri, {})
    assert located(uri, {}, 2) == (at_v2, {})


@pytest.mark.parametrize("options", [{}, {"topic_prefix": "shop_"}, {"topic_name": "all_orders"}])
def test_a_later_version_of_a_kafka_sink_gets_topics_of_its_own(options):
    uri = "kafka://127.0.0.1:9092"
    first = open_sink(*located(uri, options, 1), ".").topic("s.orders", False)
    second = open_sink(*located(uri, options, 2), ".").topic("s.orders", False)
    assert second == f"{first}_v2" and located(uri, options, 2)[0] == uri


def test_a_null_sink_has_nothing_to_keep_apart():
    assert located("null://", {}, 3) == ("null://", {})


def test_a_version_folder_is_not_read_as_the_first_versions(tmp_path):
    """A consumer of version 1 lists its folder: the `v2/` folder inside is version 2's."""
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [],
        [{"name": "out", "uri": "file://target/sink/out"}],
    )
    sink = load_project(root)[0].sinks["out"]
    for name in ("2026-11-27/a.ndjson", "v2/2026-11-27/b.ndjson", "v10/c.ndjson"):
        (root / "target/sink/out" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "target/sink/out" / name).write_text("{}\n")
    first = at_version(sink, 1)
    second = at_version(sink, 2)
    assert second.uri_display == "file://target/sink/out/v2"
    assert open_sink(first.uri, first.options, str(root)).folder().list() == ["2026-11-27/a.ndjson"]
    assert open_sink(second.uri, second.options, str(root)).folder().list() == ["2026-11-27/b.ndjson"]


def _job(job_id: int, version: int, start: int, high_water: int) -> Job:
    return stored_job(
        job_id,
        feed="orders",
        version=version,
        definition=definition("s.t", initial_scan="no"),
        sink_uri="kafka://k:9092",
        start=Hlc(start),
        high_water=Hlc(high_water),
    )


def test_a_feeds_versions_are_no_gap_between_jobs():
    """Two versions into one Kafka cluster write different topics: the second starting past the first's mark
    is no gap; a second job of one version is."""
    assert gaps([_job(1, 1, 10, 20), _job(2, 2, 30, 0)]) == []
    assert len(gaps([_job(1, 1, 10, 20), _job(2, 1, 30, 0)])) == 1


def test_an_earlier_versions_job_runs_from_its_own_definition(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "orders", "tables": ["s.orders"], "sink": "out", "version": 2}],
        [{"name": "out", "uri": "file://target/sink/out"}],
    )
    project = load_project(root)[0]
    job = _job(1, 1, 10, 20)
    job = replace(job, definition_json=stored(replace(definition_of(job), sink="out")))
    compiled = as_compiled(job, project.feeds["orders"], project)
    assert compiled.feed.version == 1 and compiled.tables == ["s.t"] and compiled.definition_hash == "sha256:x"
    assert compiled.options == definition_of(job).options
    gone = replace(job, definition_json=stored(replace(definition_of(job), sink="old")))
    with pytest.raises(RunError, match="emits into sink old, which the project no longer defines"):
        as_compiled(gone, project.feeds["orders"], project)


def test_a_feed_removed_with_two_versions_running_names_both_jobs(tmp_path):
    from feedctl.commands.plan import plan
    from feedctl.state import jobs
    from feedctl.state.store import StateStore

    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}},
        [{"name": "other", "tables": ["s.orders"], "sink": "out"}],
        [{"name": "out", "uri": "file://target/sink/out"}],
    )
    store = StateStore.of_project(load_project(root)[0])
    with store.transaction() as conn:
        made = [
            jobs.create_job(conn, "orders", "sha256:x", definition("s.orders"), "file://x", Hlc(1), {}, version)
            for version in (1, 2)
        ]
    store.close()
    [removed] = [c for c in plan(root).feeds if c.name == "orders"]
    assert removed.change == "removed" and removed.job_id == made[1].job_id
    assert removed.diff[1] == (
        f"version 1: job {made[0].job_id} runs on no node either (`feedctl cancel {made[0].job_id}`)"
    )
