"""A job's coordinator on a --follow node, turn by turn on the node's scheduler (`node/scheduler.py`): it
claims the job's lease and coordinates while this node holds it, stepping the job whenever it is woken or
its nap ends (`JobCoordinator.nap`), and stands by while another live node holds it, ready to take it over
once that node dies or its lease expires. A turn never sleeps: a step that must wait (a sink away, the store
busy) keeps the lease and asks for its next turn after the wait, which no wake shortens."""

from __future__ import annotations

import threading
import time

from feedctl.coordinator.job_coordinator import JobCoordinator
from feedctl.coordinator.lease import Heartbeat
from feedctl.errors import ErrorKind, RetryLater
from feedctl.state import jobs


class Turns:
    """`turn()` for the scheduler; `done` is set once the job no longer runs (or an error stopped its
    coordinator: `coordinator.error`), and the turns end once `stop` or `done` is set."""

    def __init__(self, coordinator: JobCoordinator, stop: threading.Event, done: threading.Event):
        self.coordinator, self.stop, self.done = coordinator, stop, done
        self._beat: Heartbeat | None = None  # while this node holds the lease
        self._not_before = 0.0  # a wait a step asked for (monotonic): no turn, woken or not, before it

    def turn(self) -> float | None:
        coordinator = self.coordinator
        coordinator.wake.clear()
        if self.stop.is_set() or self.done.is_set():
            return self._end()
        wait = self._not_before - time.monotonic()
        if wait > 0:
            return wait
        try:
            return self._coordinate()
        except Exception as exc:
            self._release()
            failure = coordinator.retrying.classify(exc)
            if failure.kind == ErrorKind.FENCED:
                coordinator.log(
                    f"{coordinator.feed}: no longer coordinates job {coordinator.job_id} ({exc}); standing by",
                    event="lease_lost",
                    feed=coordinator.feed,
                    job_id=coordinator.job_id,
                )
                return 0.0
            if failure.kind == ErrorKind.STOPPED:
                self.done.set()
                return self._end()
            if (wait := coordinator.retrying.store_wait(exc)) is not None:
                return self._wait(wait)
            coordinator.error = exc
        except BaseException as exc:  # the node's spans stop with it: the error reaches the run's report
            self._release()
            coordinator.error = exc
        self.done.set()
        return self._end()

    def _coordinate(self) -> float | None:
        """Claim the lease if this node does not hold it, and step the job while it does."""
        coordinator = self.coordinator
        if self._beat is None:
            coordinator.epoch, coordinator.steady = coordinator.claim(share=True), None
            if coordinator.epoch is None:  # another live node coordinates
                return coordinator.nap()
            if self.stop.is_set():  # the node began to drain during the claim: no step places spans on it
                return self._end()
            coordinator.log(
                f"{coordinator.feed}: this node coordinates job {coordinator.job_id} (lease epoch {coordinator.epoch})",
                event="coordinating",
                feed=coordinator.feed,
                job_id=coordinator.job_id,
                epoch=coordinator.epoch,
            )
            self._beat = coordinator.heartbeat().__enter__()
        if self._beat.lost.is_set():
            raise jobs.LeaseLost(f"job {coordinator.job_id}: another node took the lease")
        try:
            if coordinator.due_a_step() and coordinator.step():
                self.done.set()
                return self._end()
            if coordinator.shed():  # handed to a peer: stand by
                self._release()
                return 0.0
        except RetryLater as later:
            return self._wait(later.wait)
        except Exception as exc:
            wait = coordinator.retrying.store_wait(exc)
            if wait is None:
                raise
            # The lease kept, renewed meanwhile: a busy node released it at each wait for a pooled connection
            # past the pool's timeout, and other nodes took its jobs up, each with a step of its own, busier.
            return self._wait(wait)
        coordinator.retrying.store_outage.worked()
        return coordinator.nap()

    def _wait(self, wait: float) -> float:
        self._not_before = time.monotonic() + wait
        return wait

    def _release(self) -> None:
        """The lease given up, if this node holds it."""
        if self._beat is not None:
            beat, self._beat = self._beat, None
            beat.__exit__(None, None, None)
        try:
            self.coordinator.release()
        except Exception:  # the store away: the lease expires, or its epoch fences this node out once taken
            self.coordinator.epoch = None

    def _end(self) -> None:
        try:
            self._release()
        finally:
            self.coordinator.cut.set()  # this node's spans, asleep, look at once
