"""The kinds of error a running job meets, and the two that code raises on purpose. Which kind an exception is
decides what becomes of the job (`coordinator/failure.py:classify`), in one place, as CockroachDB's
`changefeedbase.MarkRetryableError` does: retried, the job paused or failed, or left as it is."""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    RETRYABLE = "retryable"  # a retry may fix it (storage, a sink, a task): tried again, then the job fails
    OUTAGE = "outage"  # a part is away (Spark): tried again on a new session, then the job pauses
    TERMINAL = "terminal"  # no retry fixes it (an unsupported table feature, a vacuumed file): fails at once
    FENCED = "fenced"  # another node took the job's lease: this node stops coordinating, the job is untouched
    STOPPED = "stopped"  # the job is no longer running (paused, canceled): this node stops working it
    STORE_UNAVAILABLE = "store_unavailable"  # the state store failed: tried again, no job is failed for it
    REFUSED = "refused"  # this node cannot run the job as asked: its run ends saying why, the job is untouched


class RunError(Exception):
    """A feed cannot run as asked; the message says why and what to do (`ErrorKind.REFUSED`)."""


class TerminalError(Exception):
    """What no retry fixes: the job fails at once, with this message (`ErrorKind.TERMINAL`). A Spark task that
    raises it returns it as a result rather than failing (`tasks/batch.py`)."""
