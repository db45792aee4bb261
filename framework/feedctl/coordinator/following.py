"""A job's coordinator on a --follow node, on a thread of its own: it claims the job's lease and coordinates
while this node holds it, stepping the job whenever it is woken or its nap ends (`JobCoordinator.nap`), and
stands by while another live node holds it, ready to take it over once that node dies or its lease expires."""

from __future__ import annotations

import threading

from feedctl.coordinator.job_coordinator import JobCoordinator
from feedctl.errors import ErrorKind
from feedctl.state import jobs


def serve(coordinator: JobCoordinator, stop: threading.Event, done: threading.Event) -> None:
    """Coordinate while this node holds the lease, stand by while another does; sets `done` once the
    job no longer runs."""
    try:
        while not stop.is_set() and not done.is_set():
            try:
                if _coordinate(coordinator, stop):
                    done.set()
                    return
            except Exception as exc:
                failure = coordinator.retrying.classify(exc)
                if failure.kind == ErrorKind.FENCED:
                    coordinator.log(
                        f"{coordinator.feed}: no longer coordinates job {coordinator.job_id} ({exc}); standing by",
                        event="lease_lost",
                        feed=coordinator.feed,
                        job_id=coordinator.job_id,
                    )
                elif (wait := coordinator.retrying.store_wait(exc)) is not None:
                    coordinator.epoch = None
                    stop.wait(wait)
                else:
                    raise
    except jobs.NotRunning:
        done.set()
    except BaseException as exc:  # the node's spans stop with it: the error reaches the run's report
        coordinator.error = exc
        done.set()
    finally:
        coordinator.cut.set()  # this node's spans, asleep, look at once


def _coordinate(coordinator: JobCoordinator, stop: threading.Event) -> bool:
    """Claim the lease and coordinate while it holds; True once the job no longer runs."""
    coordinator.epoch, coordinator.steady = coordinator.claim(share=True), None
    if coordinator.epoch is None:  # another live node coordinates
        coordinator.wake.wait(coordinator.nap())
        coordinator.wake.clear()
        return False
    coordinator.log(
        f"{coordinator.feed}: this node coordinates job {coordinator.job_id} (lease epoch {coordinator.epoch})",
        event="coordinating",
        feed=coordinator.feed,
        job_id=coordinator.job_id,
        epoch=coordinator.epoch,
    )
    try:
        with coordinator.heartbeat() as beat:
            while not stop.is_set():
                if beat.lost.is_set():
                    raise jobs.LeaseLost(f"job {coordinator.job_id}: another node took the lease")
                try:
                    if coordinator.due_a_step() and coordinator.step():
                        return True
                    if coordinator.shed():
                        return False
                except Exception as exc:
                    wait = coordinator.retrying.store_wait(exc)
                    if wait is None:
                        raise
                    # The lease kept, renewed meanwhile: a busy node released it at each wait for a pooled
                    # connection past the pool's timeout, and other nodes took its jobs up, each with a step
                    # of its own, busier in turn.
                    stop.wait(wait)
                    continue
                coordinator.retrying.store_outage.worked()
                coordinator.wake.wait(coordinator.nap())
                coordinator.wake.clear()
    finally:
        coordinator.release()
    return False
