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


def _lines(folder) -> list[str]:
    return sorted(line for path in folder.rglob("*.ndjson") for line in path.read_text().splitlines())


def test_a_small_batch_is_written_by_the_node_itself_as_spark_writes_it(spark, tmp_path):
    """At most `here_rows` changes of a feed without a CDC query: written without Spark, through the same task
    body, into the same messages; a sink's error is the feed's alone as from a Spark job. A CDC query's batch
    still goes to Spark."""
    plain, queried, failing = batches(tmp_path)
    by_spark = outcome(run_shared(spark, [[plain]]), 0)
    here = open_sink(f"file://{tmp_path / 'here'}", {}, str(tmp_path))
    alone = replace(plain, target=here.target("s.t", "t", 1, 1, 1, "json", Envelope()))

    def no_spark():
        raise AssertionError("Spark was asked for a batch the node writes itself")

    jobs = SparkJobs(here_rows=100)
    written = jobs.run(no_spark, [alone])
    assert sum(r["messages"] for r in written) == sum(r["messages"] for r in by_spark) == 100
    spark_folder = next(p for p in tmp_path.rglob("*.ndjson") if "here" not in p.parts).parent
    assert _lines(tmp_path / "here") == _lines(spark_folder) and len(_lines(spark_folder)) == 100
    with pytest.raises(TaskFailed, match="Connection|refused|webhook"):
        jobs.run(no_spark, [failing])
    assert sum(r["messages"] for r in jobs.run(lambda: spark, [queried])) == 10
    assert jobs.here == 2
    assert sum(r["messages"] for r in SparkJobs(here_rows=99).run(lambda: spark, [plain])) == 100, "over: Spark"
