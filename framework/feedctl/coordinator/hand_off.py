"""A node outside a feed's `execution_locality` neither coordinates nor emits its job. Finding the job with
no live matching coordinator, it hands the lease at once to the live node that matches the filter, works the
feed, and shares the most locality tiers with it (ties: the node coordinating the fewest jobs, then by id),
as CockroachDB moves a job created on a node outside the filter. When no live node matches for `grace`
seconds, it fails the job with an error naming the filter."""

from __future__ import annotations

import time
from threading import Event

from feedctl.coordinator import locality
from feedctl.coordinator.wait import Stepping, Wait
from feedctl.state import jobs, nodes
from feedctl.state.jobs import JobStatus
from feedctl.state.store import StateStore


def no_match(wanted: str) -> str:
    return f"no live node matches execution_locality {wanted}"


def closest(here: str, candidates: list[nodes.Node], coordinating: dict[str, int]) -> nodes.Node:
    return min(candidates, key=lambda n: (-locality.shared(here, n.locality), coordinating.get(n.holder, 0), n.node_id))


class HandOff:
    def __init__(self, store: StateStore, job_id: int, feed: str, wanted: str, here: str, settings, log):
        self.store, self.job_id, self.feed, self.wanted, self.here = store, job_id, feed, wanted, here
        self.settings, self.log = settings, log
        self.grace = settings.locality_grace if settings.locality_grace is not None else 2 * settings.liveness_ttl

    def serve(self, stop: Event, report) -> Stepping[None]:
        """Until the job stops running (or, in a one-off run, until a matching node has it): hand it to a
        matching node whenever none coordinates it, and fail it once none has been live for `grace`; a step
        of the feed's run, waiting between looks (`node/scheduler.py`)."""
        none_since = time.time()
        while not stop.is_set():
            with self.store.transaction() as conn:
                state = self._step(conn, report, failing=time.time() - none_since >= self.grace)
            if state == "stopped":
                return
            if state == "waiting":
                yield Wait(min(self.settings.poll_interval, self.grace), stop)
                continue
            none_since = time.time()
            if state == "again":
                continue
            if not self.settings.follow:
                return
            yield Wait(self.settings.poll_interval, stop)

    def _step(self, conn, report, failing: bool) -> str:
        """stopped (the job no longer runs), placed (a matching node has it), again (a node claimed it
        meanwhile: look again) or waiting (for a matching node)."""
        job = jobs.get_job(conn, self.job_id)
        if job.status != JobStatus.RUNNING:
            report.status = job.status
            return "stopped"
        now = time.time()
        live = [n for n in nodes.list_nodes(conn) if n.live(now, self.settings.liveness_ttl)]
        holder = next((n for n in live if n.holder == job.coordinator), None)
        if holder is not None and locality.matches(self.wanted, holder.locality):
            report.note = f"coordinated by {holder.node_id}, which matches execution_locality {self.wanted}"
            return "placed"
        matching = [n for n in live if self.feed in n.feeds and locality.matches(self.wanted, n.locality)]
        if matching:
            to = closest(self.here, matching, jobs.leases_held(conn))
            if not jobs.hand_lease(conn, self.job_id, job.lease_epoch, to.holder, self.settings.lease_ttl):
                return "again"
            report.note = f"handed coordination to {to.node_id} (execution_locality {self.wanted})"
            self.log(
                f"{self.feed}: job {self.job_id} handed to {to.node_id}, the node matching "
                f"execution_locality {self.wanted} closest to this one",
                event="handed_over",
                feed=self.feed,
                job_id=self.job_id,
                node=to.node_id,
            )
            return "placed"
        if failing:
            error = no_match(self.wanted)
            if jobs.finish(conn, self.job_id, JobStatus.FAILED, error=error, epoch=job.lease_epoch):
                report.status, report.note, report.error = JobStatus.FAILED, error, error
                self.log(
                    f"{self.feed}: job {self.job_id} failed: {error} (waited {self.grace:g}s)",
                    event="job_failed",
                    feed=self.feed,
                    job_id=self.job_id,
                    error=error,
                )
                return "stopped"
        report.note = f"waiting for a live node matching execution_locality {self.wanted}"
        return "waiting"
