"""One error policy for the coordinator and the node: what each kind of error does to a job, and what the one
retry helper tries again."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from feedctl.coordinator.backoff import Backoff, Retrying
from feedctl.coordinator.failure import classify
from feedctl.errors import ErrorKind, RunError
from feedctl.project.options import resolve
from feedctl.source.delta import SourceError
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import SparkUnavailable
from feedctl.state.jobs import LeaseLost, NotRunning
from feedctl.units import Hlc

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
    ],
)
def test_each_kind_of_error_does_one_thing_to_the_job(exc, kind, retried, ends_job):
    failure = classify(exc, SparkPlace("local[2]"))
    assert (failure.kind, failure.retried, failure.ends_job) == (kind, retried, ends_job)
    assert "\n" not in failure.cause and failure.cause


OPTIONS = resolve({}, None, has_query=False)  # a retry is counted under the feed's metrics_label


def _retrying(log: list, retries: int = 3) -> Retrying:
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
