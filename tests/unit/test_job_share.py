"""When a --follow node's coordinator leaves a free lease to a peer, and when it looks at handing its job over:
decided from the claims' outcomes and the clock alone."""

from __future__ import annotations

from feedctl.coordinator import job_share
from feedctl.coordinator.job_share import LEAVE_FOR, JobShare
from feedctl.coordinator.lease import Claim


def test_a_free_lease_is_left_to_a_peer_for_leave_for_counted_from_the_first_claim_that_left_it():
    share = JobShare()
    assert share.leaving(0.0) and share.claim_in(0.0) is None
    share.claimed(Claim(None, left=True), 100.0)
    share.claimed(Claim(None, left=True), 110.0)  # left again: the wait is not started over
    assert share.claim_in(110.0) == LEAVE_FOR - 10.0
    assert share.leaving(100.0 + LEAVE_FOR - 0.1)
    assert not share.leaving(100.0 + LEAVE_FOR)  # then it claims the lease if still free
    share.claimed(Claim(7), 100.0 + LEAVE_FOR)
    assert share.claim_in(200.0) is None and share.leaving(200.0)


def test_a_job_just_claimed_is_not_handed_over_before_half_of_shed_every_and_then_looked_at_once_per_look(
    monkeypatch,
):
    monkeypatch.setattr(job_share, "SHED_EVERY", 30.0)
    share = JobShare()
    share.claimed(Claim(3), 1000.0)
    assert not share.shed_due(1000.0 + 14.9)
    due = next(t for t in range(1015, 1046) if share.shed_due(float(t)))
    assert 1015 <= due <= 1045
    assert not share.shed_due(float(due))  # the next look is scheduled again, half to one and a half apart
    share.claimed(Claim(None, left=True), 2000.0)  # a claim that took nothing leaves the schedule alone
    assert share.shed_due(2000.0)
