"""A --follow node's share of the jobs it could coordinate: a free lease left a while to a peer holding fewer
leases, and now and then a job it coordinates handed to such a peer, so that nodes started together or apart
come to hold about as many jobs each. When to do either is decided here; the lease's writes, each deciding
again in the store, are `lease.claim` and `lease.shed`."""

from __future__ import annotations

import random

from feedctl.coordinator.lease import Claim

# Seconds a --follow node leaves a free lease to a peer holding fewer leases before claiming it: long enough for
# a busy peer to claim its share of the jobs of nodes started together; no longer than a job may wait for one.
LEAVE_FOR = 15.0
# Seconds, give or take half, between a --follow node's looks at whether to hand a job it coordinates to a peer
# coordinating fewer (`shed`). Never within as long of claiming the job: no hand-over amid a failover.
SHED_EVERY = 30.0


class JobShare:
    """One job's coordinator's part in sharing: since when it leaves the free lease to a peer, and when it
    next looks at handing the job over. Times are monotonic seconds."""

    def __init__(self):
        self.left_since: float | None = None  # since when the free lease is left to a peer
        self._shed_at = 0.0

    def leaving(self, now: float) -> bool:
        """Whether a claim now still leaves a free lease to a peer holding fewer: for `LEAVE_FOR` at most."""
        return self.left_since is None or now - self.left_since < LEAVE_FOR

    def claimed(self, claim: Claim, now: float) -> None:
        """After a claim: a lease left to a peer starts the wait, one claimed (a job just taken over) stays
        here a while."""
        if not claim.left:
            self.left_since = None
        elif self.left_since is None:
            self.left_since = now
        if claim.epoch is not None:
            self._shed_later(now)

    def claim_in(self, now: float) -> float | None:
        """Seconds until a free lease left to a peer is claimed if still free; None when none is left."""
        return None if self.left_since is None else self.left_since + LEAVE_FOR - now

    def shed_in(self, now: float) -> float:
        """Seconds until the next look at handing the job over."""
        return self._shed_at - now

    def shed_due(self, now: float) -> bool:
        """Whether to look at handing the job over now; the next look is then scheduled."""
        if now < self._shed_at:
            return False
        self._shed_later(now)
        return True

    def _shed_later(self, now: float) -> None:
        self._shed_at = now + SHED_EVERY * random.uniform(0.5, 1.5)  # the node's coordinators look apart
