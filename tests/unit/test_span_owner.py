"""Where spans go: evenly over the live nodes that work a feed, a dead node's spans at once (or after the
grace window), and the fewest moves when a node joins, each handed over at its owner's batch boundary."""

from __future__ import annotations

from collections import Counter

from feedctl.coordinator.span_owner import place
from feedctl.state.spans import Span
from feedctl.units import Hlc


def spans(owners: list[str | None], moving: dict[int, str] | None = None) -> list[Span]:
    moving = moving or {}
    return [Span("t", i, owner, moving.get(i), 3, Hlc(30), "", None) for i, owner in enumerate(owners)]


def after(current: list[Span], moves) -> Counter:
    """Where each span is once the moves are done (hand-overs included)."""
    owner = {s.span: s.moving_to or s.node for s in current}
    owner.update({m.span.span: m.to or m.span.node for m in moves})
    return Counter(owner.values())


def test_new_spans_are_spread_evenly_at_once():
    current = spans([None] * 8)
    moves = place(current, ["n1", "n2", "n3"], {}, 0, 100)
    assert all(m.now for m in moves) and len(moves) == 8
    assert sorted(after(current, moves).values()) == [2, 3, 3]


def test_a_dead_nodes_spans_move_and_no_other():
    current = spans(["n1", "n2", "n3", "n1", "n2", "n3"])
    moves = place(current, ["n1", "n2"], {"n3": 95}, 0, 100)
    assert {m.span.span for m in moves} == {2, 5} and all(m.now for m in moves)
    assert {m.to for m in moves} == {"n1", "n2"}
    assert all("n3 is not live" in m.reason for m in moves)


def test_a_dead_node_keeps_its_spans_through_the_grace_window():
    current = spans(["n1", "n2", "n3"])
    assert place(current, ["n1", "n2"], {"n3": 95}, 30, 100) == []
    assert {m.span.span for m in place(current, ["n1", "n2"], {"n3": 95}, 30, 126)} == {2}
    # a node that left (not registered, or no longer working the feed) gives up its spans at once
    assert {m.span.span for m in place(current, ["n1", "n2"], {}, 30, 100)} == {2}


def test_a_joining_node_takes_the_fewest_spans_at_batch_boundaries():
    current = spans(["n1", "n2"] * 6)
    moves = place(current, ["n1", "n2", "n3"], {}, 0, 100)
    assert len(moves) == 4 and not any(m.now for m in moves) and {m.to for m in moves} == {"n3"}
    assert sorted(after(current, moves).values()) == [4, 4, 4]
    # once handed over (or while on their way), nothing more moves
    handed = spans(["n1", "n2"] * 6, {m.span.span: m.to for m in moves})
    assert place(handed, ["n1", "n2", "n3"], {}, 0, 100) == []


def test_a_hand_over_to_a_node_that_left_is_called_off_and_the_span_placed_again():
    current = spans(["n1", "n1", "n2", "n2"], {1: "n3"})
    moves = place(current, ["n1", "n2"], {}, 0, 100)
    assert [(m.span.span, m.to, m.now) for m in moves] == [(1, None, False)]
    # the owner died before handing it over: it goes straight to where it was bound
    current = spans(["n1", "n1", "n2", "n2"], {1: "n2"})
    moves = place(current, ["n2", "n3"], {"n1": 99}, 0, 100)
    assert (1, "n2", True) in [(m.span.span, m.to, m.now) for m in moves]


def test_no_live_node_moves_nothing():
    assert place(spans(["n1", None]), [], {"n1": 0}, 0, 100) == []


def test_ties_go_to_the_node_holding_fewest_spans_of_other_jobs():
    # a job of two spans over three nodes: not the node that already holds most of the other jobs' spans
    moves = place(spans([None, None]), ["n0", "n1", "n2"], {}, 0, 100, {"n0": 5, "n1": 1, "n2": 0})
    assert sorted(m.to for m in moves) == ["n1", "n2"]
