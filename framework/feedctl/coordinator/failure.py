"""What an exception means for a job, decided once for the coordinator and the node alike: its kind
(`errors.ErrorKind`) and the one line a user reads. An outage is a part away (Spark, by `spark.session.outage`;
a sink, a broker, an object store or an endpoint, by `errors.unavailable`); an error no retry fixes is
raised as `TerminalError` (a table feature, a vacuumed file, an option a sink refuses); anything else may be
fixed by a retry, a few times."""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.diagnostics import first_line
from feedctl.errors import ErrorKind, RetryLater, RunError, TerminalError, unavailable
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import outage
from feedctl.state import jobs
from feedctl.state.store import STORE_ERRORS


@dataclass(frozen=True)
class Failure:
    kind: ErrorKind
    cause: str  # one line
    spark: bool = False  # an outage of Spark: the next attempt starts a new session

    @property
    def retried(self) -> bool:
        """Whether trying the same step again may succeed."""
        return self.kind in (ErrorKind.RETRYABLE, ErrorKind.OUTAGE, ErrorKind.STORE_UNAVAILABLE)

    @property
    def ends_job(self) -> bool:
        """Whether the job is paused or failed for it once retries are spent (a store away, a lease lost, a
        job stopped or a node that cannot run it end this node's work, and leave the job as it is)."""
        return self.kind in (ErrorKind.RETRYABLE, ErrorKind.OUTAGE, ErrorKind.TERMINAL)


def classify(exc: BaseException, spark: SparkPlace) -> Failure:
    if isinstance(exc, TerminalError):
        return Failure(ErrorKind.TERMINAL, str(exc))
    if isinstance(exc, RetryLater):
        return Failure(ErrorKind.WAITING, exc.cause)
    if isinstance(exc, RunError):
        return Failure(ErrorKind.REFUSED, str(exc))
    if isinstance(exc, jobs.LeaseLost):
        return Failure(ErrorKind.FENCED, str(exc))
    if isinstance(exc, jobs.NotRunning):
        return Failure(ErrorKind.STOPPED, str(exc))
    if cause := store_failure(exc):
        return Failure(ErrorKind.STORE_UNAVAILABLE, cause)
    cause = outage(exc, spark)
    if cause:
        return Failure(ErrorKind.OUTAGE, cause, spark=True)
    if unavailable(exc):  # a sink, a broker, an object store or an endpoint away, slow or throttling
        return Failure(ErrorKind.OUTAGE, first_line(exc))
    return Failure(ErrorKind.RETRYABLE, f"{type(exc).__name__}: {first_line(exc)}")


def store_failure(exc: BaseException) -> str:
    """One line saying the state store failed, when `exc` is the store away or busy, or the session it ended
    while this process stood still; '' otherwise."""
    return f"the state store failed ({first_line(exc)})" if isinstance(exc, STORE_ERRORS) else ""
