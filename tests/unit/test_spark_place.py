"""Where a project's Spark runs, decided without Spark: which settings a Spark Connect session takes, whether
its executors share this host's disk, how a remote is shown; and what an error of Spark Connect means for a
job."""

from __future__ import annotations

import grpc
import pytest
from pyspark.errors.exceptions.connect import SparkConnectGrpcException

from feedctl.coordinator.failure import classify
from feedctl.errors import ErrorKind
from feedctl.project.env_vars import REDACTED
from feedctl.spark.place import SparkPlace, redact_remote, remote_address

REMOTE = "sc://dbc-1.cloud.databricks.com:443/;token=dapi0123456789;x-databricks-cluster-id=0101-abc;use_ssl=true"


def test_a_remote_is_shown_without_its_token_nor_unknown_parameters():
    shown = redact_remote(REMOTE)
    assert "dapi0123456789" not in shown and "0101-abc" not in shown
    assert (
        shown
        == f"sc://dbc-1.cloud.databricks.com:443/;token={REDACTED};x-databricks-cluster-id={REDACTED};use_ssl=true"
    )
    assert SparkPlace(remote=REMOTE).described() == shown
    assert remote_address(REMOTE) == ("dbc-1.cloud.databricks.com", 443)
    assert remote_address("sc://host") == ("host", 15002)


def test_a_remote_session_takes_spark_sqls_runtime_settings_and_hadoops_alone():
    conf = {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.session.timeZone": "UTC",
        "spark.hadoop.fs.s3a.endpoint": "http://x",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",  # static: the server's start
        "spark.driver.memory": "4g",
        "spark.executor.instances": "3",
        "spark.api.mode": "connect",  # feedctl's own reading
    }
    place = SparkPlace(conf=conf, remote="sc://localhost:15002")
    assert place.session_conf() == {k: conf[k] for k in list(conf)[:3]}
    assert place.ignored_by_remote() == ["spark.sql.extensions", "spark.driver.memory", "spark.executor.instances"]
    assert SparkPlace(conf=conf).ignored_by_remote() == []  # a classic session takes them all


@pytest.mark.parametrize(
    "place, connect, shares_disk, checks_executors",
    [
        (SparkPlace("local[2]"), False, True, False),
        (SparkPlace("spark://m:7077"), False, False, True),
        (SparkPlace("local[2]", {"spark.api.mode": "connect"}), True, True, False),
        (SparkPlace(remote="sc://localhost:15002/;token=t"), True, True, True),
        (SparkPlace(remote="sc://127.0.0.1:15002"), True, True, True),
        (SparkPlace(remote=REMOTE), True, False, True),
    ],
)
def test_what_each_place_of_spark_means(place, connect, shares_disk, checks_executors):
    assert (place.connect, place.shares_disk, place.checks_executors) == (connect, shares_disk, checks_executors)


def _grpc_error(code: grpc.StatusCode, message: str, condition: str | None = None) -> SparkConnectGrpcException:
    return SparkConnectGrpcException(message=message, errorClass=condition, grpc_status_code=code)


def test_a_server_away_or_a_session_it_forgot_is_an_outage_named_without_its_token():
    place = SparkPlace(remote="sc://localhost:1/;token=secret-token-value")  # nothing listens on port 1
    away = classify(_grpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"), place)
    assert away.kind == ErrorKind.OUTAGE
    assert "cannot connect to the Spark Connect server sc://localhost:1/" in away.cause
    assert "secret-token-value" not in away.cause and "\n" not in away.cause

    forgot = _grpc_error(grpc.StatusCode.INTERNAL, "[INVALID_HANDLE.SESSION_NOT_FOUND] ...", "INVALID_HANDLE")
    lost = classify(forgot, place)
    assert lost.kind == ErrorKind.OUTAGE and "no longer knows this session" in lost.cause


def test_an_error_of_the_work_through_spark_connect_is_no_outage():
    place = SparkPlace(remote="sc://localhost:15002")
    failed = classify(_grpc_error(grpc.StatusCode.INTERNAL, "Python worker exited unexpectedly"), place)
    assert failed.kind == ErrorKind.RETRYABLE
    assert classify(ValueError("x"), place).kind == ErrorKind.RETRYABLE
