"""The coordinator's decision on a project's change under several nodes (`job/rollout.py`): the job
takes the coordinator's copy only once every live node working the feed has it, each loaded after the job took
its revision; an older copy on the coordinator or on any node changes nothing."""

from __future__ import annotations

from feedctl.job.rollout import decide
from feedctl.state import nodes, sequence
from feedctl.state.nodes import View
from feedctl.state.store import StateStore

JOB_SINCE = 10  # the store's sequence number when the job took its revision


def held(**views: str | None) -> dict[str, View | None]:
    """Each node's view, loaded after the job's revision."""
    return {n: View(v, JOB_SINCE + 1) if v is not None else None for n, v in views.items()}


def coordinator(view: str, since: int = JOB_SINCE + 1) -> View:
    return View(view, since)


def test_a_copy_is_taken_once_every_working_node_has_it():
    assert decide("old", JOB_SINCE, coordinator("new"), held(a="new", b="new", c="new"), "a").apply
    one_behind = decide("old", JOB_SINCE, coordinator("new"), held(a="new", b="new", c="old"), "a")
    assert not one_behind.apply and one_behind.differing == ("c",)
    assert "c has another copy" in one_behind.describe(1)
    half_deployed = decide("old", JOB_SINCE, coordinator("new"), held(a="new", b="half", c=None), "a")
    assert not half_deployed.apply and half_deployed.differing == ("b", "c"), "a node with no view blocks too"


def test_a_coordinator_whose_copy_is_the_jobs_changes_nothing_whatever_the_others_have():
    assert decide("job", JOB_SINCE, coordinator("job"), held(a="job", b="newer", c="newer"), "a") == decide(
        "job", JOB_SINCE, coordinator("job"), {}, "a"
    )
    assert not decide("job", JOB_SINCE, coordinator("job"), held(b="newer"), "a").apply


def test_a_coordinator_that_has_not_published_its_copy_waits():
    assert not decide("old", JOB_SINCE, None, held(b="new"), "a").apply


def test_a_coordinator_with_an_older_copy_does_not_take_it_back_from_nodes_that_run_the_job():
    stale = decide("v2", JOB_SINCE, coordinator("v1"), held(a="v1", b="v2", c="v2"), "a")
    assert not stale.apply and stale.differing == ("b", "c")


def test_a_change_reverted_everywhere_is_taken_like_any_other():
    assert decide("v2", JOB_SINCE, coordinator("v1"), held(a="v1", b="v1"), "a").apply


def test_a_job_made_from_a_copy_no_node_has_yet_is_not_taken_back_to_theirs():
    """`run --new-job` from a copy deployed to the nodes afterwards: every node agrees on the copy they
    loaded before the job was made, and the job keeps its own until they load a newer one."""
    before = {"a": View("v1", 4), "b": View("v1", 7)}
    kept = decide("v2", JOB_SINCE, View("v1", 4), before, "a")
    assert not kept.apply and kept.older == ("a", "b")
    assert "after a, b loaded theirs" in kept.describe(1) and "cancel the job" in kept.describe(1)
    one_after = decide("v2", JOB_SINCE, View("v1", 4), {**before, "b": View("v1", JOB_SINCE + 3)}, "a")
    assert not one_after.apply and one_after.older == ("a",), "every node must have loaded it after the job"
    assert decide("v2", JOB_SINCE, View("v3", 12), {"a": View("v3", 12), "b": View("v3", 15)}, "a").apply


def test_a_job_recorded_before_the_sequence_was_kept_takes_any_agreed_copy():
    assert decide("old", 0, View("new", 1), {"a": View("new", 1)}, "a").apply


def test_a_one_off_run_alone_takes_its_copy_at_once():
    assert decide("old", JOB_SINCE, coordinator("new"), {}, "me").apply


def test_nodes_publish_their_views_and_only_those_working_the_feed_count(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    with store.transaction() as conn:
        nodes.register(conn, "a", "", feeds=("f",))
        b = nodes.register(conn, "b", "", pid=1, feeds=("f",))
        nodes.publish_view(conn, "a", "f", "view:1", 3)
        nodes.publish_view(conn, "a", "g", "view:9", 3)
        assert nodes.views(conn, "f") == {"a": View("view:1", 3), "b": None}
        nodes.stop_working(conn, b, "f")
        assert nodes.views(conn, "f") == {"a": View("view:1", 3)}
        nodes.start_working(conn, b, "f")
        nodes.publish_view(conn, "b", "f", "view:1", 5)
        assert nodes.views(conn, "f") == {"a": View("view:1", 3), "b": View("view:1", 5)}
        assert nodes.view_of(conn, "a", "g") == View("view:9", 3)


def test_a_view_keeps_when_the_node_first_had_it_across_restarts_and_reloads(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    with store.transaction() as conn:
        a = nodes.register(conn, "a", "", feeds=("f",))
        assert nodes.publish_view(conn, "a", "f", "view:1", 3) == View("view:1", 3)
        nodes.deregister(conn, a)
        nodes.register(conn, "a", "", feeds=("f",))
        assert nodes.publish_view(conn, "a", "f", "view:1", 8) == View("view:1", 3), "the same copy, restarted"
        assert nodes.publish_view(conn, "a", "f", "view:2", 9) == View("view:2", 9)
        assert nodes.publish_view(conn, "a", "f", "view:1", 11) == View("view:1", 11), "reverted: loaded anew"


def test_the_sequence_orders_what_each_transaction_did(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    with store.transaction() as conn:
        first = sequence.tick(conn)
    with store.transaction() as conn:
        assert sequence.tick(conn) == first + 1
    again = StateStore(f"sqlite:///{tmp_path}/state.db")
    with again.transaction() as conn:
        assert sequence.tick(conn) == first + 2, "kept in the store"
