"""What an exception means for a job, decided once for the coordinator and the node alike: its kind
(`errors.ErrorKind`) and the one line a user reads."""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.diagnostics import first_line
from feedctl.errors import ErrorKind, RunError, TerminalError
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import outage
from feedctl.state import jobs
from feedctl.state.store import STORE_ERRORS


@dataclass(frozen=True)
class Failure:
    kind: ErrorKind
    cause: str  # one line

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
    if isinstance(exc, RunError):
        return Failure(ErrorKind.REFUSED, str(exc))
    if isinstance(exc, jobs.LeaseLost):
        return Failure(ErrorKind.FENCED, str(exc))
    if isinstance(exc, jobs.NotRunning):
        return Failure(ErrorKind.STOPPED, str(exc))
    if isinstance(exc, STORE_ERRORS):  # the store away or busy, or the session it ended while this process stood still
        return Failure(ErrorKind.STORE_UNAVAILABLE, f"the state store failed ({first_line(exc)})")
    cause = outage(exc, spark)
    if cause:
        return Failure(ErrorKind.OUTAGE, cause)
    return Failure(ErrorKind.RETRYABLE, f"{type(exc).__name__}: {first_line(exc)}")
