"""Feeds sharing a Spark job: the batches of several feeds run as one job, each keeping its own results; a
feed whose sink fails gets its error alone, and the others their files, from the same job."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from feedctl.encoding.envelope import Envelope
from feedctl.node.spark_jobs import SparkJobs
from feedctl.sinks.registry import open_sink
from feedctl.spark.training import small_batch
from feedctl.tasks.batch import TableBatch, TaskFailed, outcome, run_shared
from feedctl.testing.devservers import free_port


def batches(tmp_path):
    """Three feeds' batches of the same staged changes: one into a folder, one with a CDC query, one into a
    webhook nothing listens at."""
    staged, sink = small_batch(tmp_path, 100)
    nowhere = open_sink(
        f"webhook-http://127.0.0.1:{free_port()}/x",
        {"webhook_sink_config": {"Retry": {"Max": 0}}, "webhook_client_timeout": "1s"},
        str(tmp_path),
    )
    plain = TableBatch(
        "s.t",
        staged.spans(),
        staged.schema,
        ["id", "v"],
        ["id"],
        [0, 1],
        None,
        sink.target("s.t", "t", 1, 1, 1, "json", Envelope()),
        "1.0",
        False,
    )
    queried = replace(
        plain, sql="SELECT id FROM s.t WHERE id < 10", target=sink.target("s.t", "t", 1, 2, 1, "json", Envelope())
    )
    failing = replace(plain, target=nowhere.target("s.t", "t", 1, 3, 1, "json", Envelope()))
    return plain, queried, failing


def test_each_feed_of_a_shared_job_gets_its_own_files_or_its_own_error(spark, tmp_path):
    plain, queried, failing = batches(tmp_path)
    records = run_shared(spark, [[plain], [failing], [queried]])
    assert sum(r["messages"] for r in outcome(records, 0)) == 100
    assert sum(r["messages"] for r in outcome(records, 2)) == 10
    with pytest.raises(TaskFailed, match="Connection|refused|webhook"):
        outcome(records, 1)


def test_feeds_due_together_run_through_the_nodes_spark_jobs(spark, tmp_path):
    plain, queried, failing = batches(tmp_path)
    jobs, results = SparkJobs(), {}

    def run(name, table):
        try:
            results[name] = sum(r["messages"] for r in jobs.run(lambda: spark, [table]))
        except TaskFailed as exc:
            results[name] = exc

    threads = [
        threading.Thread(target=run, args=a) for a in (("plain", plain), ("queried", queried), ("failing", failing))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["plain"] == 100 and results["queried"] == 10
    assert isinstance(results["failing"], TaskFailed)
