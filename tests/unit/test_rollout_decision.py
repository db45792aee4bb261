"""The coordinator's decision on a project's change under several nodes (`coordinator/rollout.py`): the job
takes the coordinator's copy only once every live node working the feed has it; an older copy on the
coordinator or on any node changes nothing."""

from __future__ import annotations

from feedctl.coordinator.rollout import decide
from feedctl.state import nodes
from feedctl.state.store import StateStore


def test_a_copy_is_taken_once_every_working_node_has_it():
    assert decide("old", "new", {"a": "new", "b": "new", "c": "new"}, "a").apply
    one_behind = decide("old", "new", {"a": "new", "b": "new", "c": "old"}, "a")
    assert not one_behind.apply and one_behind.differing == ("c",)
    assert "c has another copy" in one_behind.describe(1)
    half_deployed = decide("old", "new", {"a": "new", "b": "half", "c": None}, "a")
    assert not half_deployed.apply and half_deployed.differing == ("b", "c"), "a node with no view blocks too"


def test_a_coordinator_whose_copy_is_the_jobs_changes_nothing_whatever_the_others_have():
    assert decide("job", "job", {"a": "job", "b": "newer", "c": "newer"}, "a") == decide("job", "job", {}, "a")
    assert not decide("job", "job", {"b": "newer"}, "a").apply


def test_a_coordinator_with_an_older_copy_does_not_take_it_back_from_nodes_that_run_the_job():
    stale = decide("v2", "v1", {"a": "v1", "b": "v2", "c": "v2"}, "a")
    assert not stale.apply and stale.differing == ("b", "c")


def test_a_change_reverted_everywhere_is_taken_like_any_other():
    assert decide("v2", "v1", {"a": "v1", "b": "v1"}, "a").apply


def test_a_one_off_run_alone_takes_its_copy_at_once():
    assert decide("old", "new", {}, "me").apply


def test_nodes_publish_their_views_and_only_those_working_the_feed_count(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    with store.transaction() as conn:
        nodes.register(conn, "a", "", feeds=("f",))
        b = nodes.register(conn, "b", "", pid=1, feeds=("f",))
        nodes.publish_view(conn, "a", "f", "view:1")
        nodes.publish_view(conn, "a", "g", "view:9")
        assert nodes.views(conn, "f") == {"a": "view:1", "b": None}
        nodes.stop_working(conn, b, "f")
        assert nodes.views(conn, "f") == {"a": "view:1"}
        nodes.start_working(conn, b, "f")
        nodes.publish_view(conn, "b", "f", "view:1")
        assert nodes.views(conn, "f") == {"a": "view:1", "b": "view:1"}
        assert dict(nodes.list_nodes(conn)[0].views) == {"f": "view:1", "g": "view:9"}
