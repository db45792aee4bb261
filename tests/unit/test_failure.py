"""One error policy for the coordinator and the node: what each kind of error does to a job, and what the one
retry helper tries again."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.failure import classify
from feedctl.errors import ErrorKind, RunError
from feedctl.options import resolve
from feedctl.sinks.kafka import KafkaSinkError, KafkaUnavailable
from feedctl.source.delta import SourceError
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import SparkUnavailable
from feedctl.state.jobs import LeaseLost, NotRunning
from feedctl.tasks.batch import TaskUnavailable
from feedctl.units import Hlc


def _raised_from(cause: Exception) -> Exception:
    """A library's error as a file system wraps it: the outage is its cause."""
    try:
        try:
            raise cause
        except Exception as exc:
            raise OSError("cannot write s3://sinks/f/part-0.ndjson") from exc
    except OSError as wrapped:
        return wrapped


STORE_AWAY = OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked"))


@pytest.mark.parametrize(
    "exc, kind, retried, ends_job",
    [
        (SourceError("table s.t: reader feature 'catalogManaged' is not supported"), ErrorKind.TERMINAL, False, True),
        (OSError("connection reset by peer"), ErrorKind.RETRYABLE, True, True),
        (SparkUnavailable("cannot connect to the Spark master"), ErrorKind.OUTAGE, True, True),
        (STORE_AWAY, ErrorKind.STORE_UNAVAILABLE, True, False),
        (PoolTimeout("QueuePool limit of size 5 overflow 10 reached"), ErrorKind.STORE_UNAVAILABLE, True, False),
        (LeaseLost("job 1: another node took the lease"), ErrorKind.FENCED, False, False),
        (NotRunning("paused"), ErrorKind.STOPPED, False, False),
        (RunError("feed f: its definition changed"), ErrorKind.REFUSED, False, False),
        (ConnectionRefusedError(111, "Connection refused"), ErrorKind.OUTAGE, True, True),
        (
            KafkaUnavailable("5 messages not delivered; first: t[0]: Local: Message timed out"),
            ErrorKind.OUTAGE,
            True,
            True,
        ),
        (
            KafkaSinkError("1 messages not delivered; first: t[0]: Broker: Message size too large"),
            ErrorKind.RETRYABLE,
            True,
            True,
        ),
        (TaskUnavailable("WebhookUnavailable: request failed after 4 attempts"), ErrorKind.OUTAGE, True, True),
        (_raised_from(EndpointConnectionError(endpoint_url="http://127.0.0.1:9")), ErrorKind.OUTAGE, True, True),
        (
            ClientError({"Error": {"Code": "SlowDown", "Message": "reduce your rate"}}, "PutObject"),
            ErrorKind.OUTAGE,
            True,
            True,
        ),
        (
            ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "PutObject"),
            ErrorKind.RETRYABLE,
            True,
            True,
        ),
    ],
)
def test_each_kind_of_error_does_one_thing_to_the_job(exc, kind, retried, ends_job):
    failure = classify(exc, SparkPlace("local[2]"))
    assert (failure.kind, failure.retried, failure.ends_job) == (kind, retried, ends_job)
    assert "\n" not in failure.cause and failure.cause


OPTIONS = resolve({}, None, has_query=False)  # a retry is counted under the feed's metrics_label


def _retrying(log: list, retries: int = 3, **lasting) -> Retrying:
    backoff = Backoff(0.001, 0.001, lambda: Hlc(0))
    return Retrying(
        "f",
        "n1",
        retries,
        backoff,
        None,
        SparkPlace("local[2]"),
        threading.Event(),
        lambda: OPTIONS,
        lambda m, **f: log.append(f),
        **lasting,
    )


def test_an_unsupported_table_feature_is_not_retried():
    calls, log = [], []

    def read():
        calls.append(1)
        raise SourceError("table s.t: reader feature 'catalogManaged' is not supported")

    with pytest.raises(SourceError):
        _retrying(log)("reading", read)
    assert (len(calls), log) == (1, [])


def test_what_a_retry_may_fix_is_tried_again_then_raised():
    calls, log = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise OSError("connection reset by peer")
        return "done"

    assert _retrying(log)("writing", flaky) == "done"
    assert [f["attempt"] for f in log] == [1, 2]
    with pytest.raises(OSError):
        _retrying(log, retries=2)("writing", lambda: (_ for _ in ()).throw(OSError("reset")))


def test_an_outage_on_a_follow_node_is_retried_as_long_as_it_lasts_and_said_once_then_once_over():
    calls, log, status = [], [], []

    def away_a_while():
        calls.append(1)
        if len(calls) <= 50:
            raise ConnectionRefusedError(111, "Connection refused")
        return "sent"

    retrying = _retrying(log, retries=0, outages_last=True, status=status.append)
    assert retrying("emitting", away_a_while) == "sent"
    assert [f["event"] for f in log] == ["outage", "outage_over"]  # 50 failures, two lines
    assert log[0]["cause"] == log[1]["cause"] and "Connection refused" in log[0]["cause"]
    assert len(status) == 51 and status[0].startswith("waiting since ") and status[-1] == "", (
        "the note cleared: the job runs"
    )


def test_an_outage_is_over_only_once_the_step_that_met_it_works_again():
    log, calls, said = [], [], []

    def batch():
        calls.append(1)
        if len(calls) == 2:  # another step works meanwhile (a resolved file): the part is still away
            retrying("resolved", lambda: "written")
            said.append([f["event"] for f in log])
        if len(calls) <= 2:
            raise ConnectionRefusedError(111, "Connection refused")
        return "emitted"

    retrying = _retrying(log, retries=0, outages_last=True)
    assert retrying("batch 2", batch) == "emitted"
    assert said == [["outage"]] and [f["event"] for f in log] == ["outage", "outage_over"]


def test_an_outage_of_a_one_off_run_is_tried_its_retries_then_raised():
    log = []
    with pytest.raises(ConnectionRefusedError):
        _retrying(log, retries=2)("emitting", lambda: (_ for _ in ()).throw(ConnectionRefusedError(111, "refused")))
    assert [f["attempt"] for f in log] == [1, 2]


def test_what_is_no_outage_is_tried_its_retries_on_a_follow_node_too():
    log = []
    with pytest.raises(ValueError):
        _retrying(log, retries=2, outages_last=True)("emitting", lambda: (_ for _ in ()).throw(ValueError("bad")))
    assert [f["attempt"] for f in log] == [1, 2]


def test_a_node_holds_one_kafka_producer_per_sink_however_many_batches():
    from feedctl.sinks import kafka, registry

    registry.close_clients()
    made = kafka.PRODUCERS.made
    config = kafka.producer_config("kafka://127.0.0.1:9", {})
    other = kafka.producer_config("kafka://127.0.0.1:9", {"kafka_sink_config": {"ClientID": "other"}})
    for _ in range(100):
        kafka.Producer(config)
    kafka.Producer(other)
    assert kafka.PRODUCERS.held() == 2 and kafka.PRODUCERS.made == made + 2
    registry.close_clients()
    assert kafka.PRODUCERS.held() == 0
