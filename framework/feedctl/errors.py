"""The kinds of error a running job meets, and the two that code raises on purpose. Which kind an exception is
decides what becomes of the job (`coordinator/failure.py:classify`), in one place, as CockroachDB's
`changefeedbase.MarkRetryableError` does: retried, the job paused or failed, or left as it is."""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    RETRYABLE = "retryable"  # a retry may fix it (storage, a sink, a task): tried again, then the job fails
    OUTAGE = "outage"  # a part is away (Spark, a sink, an object store): tried again for as long as it lasts
    # on a `--follow` node (a new Spark session each time for Spark), by a one-off run a few times, then the
    # job pauses
    TERMINAL = "terminal"  # no retry fixes it (an unsupported table feature, a vacuumed file): fails at once
    FENCED = "fenced"  # another node took the job's lease: this node stops coordinating, the job is untouched
    STOPPED = "stopped"  # the job is no longer running (paused, canceled): this node stops working it
    STORE_UNAVAILABLE = "store_unavailable"  # the state store failed: tried again, no job is failed for it
    REFUSED = "refused"  # this node cannot run the job as asked: its run ends saying why, the job is untouched
    WAITING = "waiting"  # a step waits out what a retry may fix, its scheduler running other steps meanwhile


class RunError(Exception):
    """A feed cannot run as asked; the message says why and what to do (`ErrorKind.REFUSED`)."""


class RetryLater(Exception):
    """A step met what a retry may fix and is to be tried again, from its start, in `wait` seconds: by the
    node's scheduler, whose worker runs other jobs' steps meanwhile rather than sleeping (`ErrorKind.WAITING`)."""

    def __init__(self, wait: float, cause: str):
        super().__init__(f"tried again in {wait:g}s: {cause}")
        self.wait, self.cause = wait, cause


class TerminalError(Exception):
    """What no retry fixes: the job fails at once, with this message (`ErrorKind.TERMINAL`). A Spark task that
    raises it returns it as a result rather than failing (`tasks/batch.py`)."""


class Unavailable(Exception):
    """A part a job depends on cannot be reached now (a sink, a broker, an object store, an endpoint):
    unreachable, timing out, throttling, refusing connections. A retry fixes it once the part is back
    (`ErrorKind.OUTAGE`)."""


# Library errors that say a part is away, by class name along their classes (their packages are imported
# only where they are used: a sink's task side, not compile's).
_AWAY = frozenset(
    {
        "EndpointConnectionError",  # botocore
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ServiceRequestError",  # azure-core
        "ServiceResponseError",
        "ServiceUnavailable",  # google-api-core
        "DeadlineExceeded",
        "TooManyRequests",
        "RetryError",
        "TransportError",  # google-auth
        "ClientConnectorError",  # aiohttp, under gcsfs and adlfs
        "ServerDisconnectedError",
        "ServerTimeoutError",
    }
)
# botocore's `ClientError` codes of a store that is busy or away (throttling, 5xx).
_BUSY_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable", "InternalError", "503"}
)


def unavailable(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, says a part is away rather than wrong."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, (Unavailable, ConnectionError, TimeoutError)):
            return True
        names = {c.__name__ for c in type(exc).__mro__}
        if names & _AWAY:
            return True
        if "ClientError" in names:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code in _BUSY_CODES:
                return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
