"""Where spans go: to their home's replicas, else the closest nodes by ordered tiers, else any node, evenly;
a dead node's spans at once (or after the grace window); the fewest moves when a node joins, each handed
over at its owner's batch boundary; `balanced_simple`'s bound."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from feedctl.coordinator.span_owner import place
from feedctl.state.spans import Span
from feedctl.units import Hlc

FLAT = {"n1": "", "n2": "", "n3": ""}
EAST_A, EAST_B, WEST_A, EU_A = (
    "region=us-east1,zone=a",
    "region=us-east1,zone=b",
    "region=us-west1,zone=a",
    "region=europe-west1,zone=a",
)
FOUR = {"e1": EAST_A, "e2": EAST_B, "w1": WEST_A, "eu": EU_A}


def spans(
    owners: list[str | None],
    moving: dict[int, str] | None = None,
    homes: list[str | None] | None = None,
    reason: str = "",
) -> list[Span]:
    moving, homes = moving or {}, homes or [None] * len(owners)
    return [
        Span("t", i, owner, moving.get(i), 3, Hlc(30), reason, None, home)
        for i, (owner, home) in enumerate(zip(owners, homes))
    ]


def after(current: list[Span], moves) -> dict[int, str]:
    """Where each span is once the moves are done (hand-overs included)."""
    owner = {s.span: s.moving_to or s.node for s in current}
    owner.update({m.span.span: m.to or m.span.node for m in moves})
    return owner


def loads(current, moves) -> list[int]:
    return sorted(Counter(after(current, moves).values()).values())


def test_new_spans_are_spread_evenly_at_once():
    current = spans([None] * 8)
    moves = place(current, FLAT, {}, 0, 100)
    assert all(m.now and m.reason == "any" for m in moves) and len(moves) == 8
    assert loads(current, moves) == [2, 3, 3]


def test_a_dead_nodes_spans_move_and_no_other():
    current = spans(["n1", "n2", "n3", "n1", "n2", "n3"])
    moves = place(current, {"n1": "", "n2": ""}, {"n3": 95}, 0, 100)
    assert {m.span.span for m in moves} == {2, 5} and all(m.now for m in moves)
    assert {m.to for m in moves} == {"n1", "n2"}
    assert all(m.cause == "n3 is not live" for m in moves)


def test_a_dead_node_keeps_its_spans_through_the_grace_window():
    current = spans(["n1", "n2", "n3"])
    two = {"n1": "", "n2": ""}
    assert place(current, two, {"n3": 95}, 30, 100) == []
    assert {m.span.span for m in place(current, two, {"n3": 95}, 30, 126)} == {2}
    # a node that left (not registered, or no longer working the feed) gives up its spans at once
    assert [(m.span.span, m.cause) for m in place(current, two, {}, 30, 100)] == [(2, "n3 left")]


def test_a_joining_node_takes_the_fewest_spans_at_batch_boundaries():
    current = spans(["n1", "n2"] * 6)
    moves = place(current, FLAT, {}, 0, 100)
    assert len(moves) == 4 and not any(m.now for m in moves) and {m.to for m in moves} == {"n3"}
    assert loads(current, moves) == [4, 4, 4]
    # once handed over (or while on their way), nothing more moves
    handed = spans(["n1", "n2"] * 6, {m.span.span: m.to for m in moves})
    assert place(handed, FLAT, {}, 0, 100) == []


def test_a_hand_over_to_a_node_that_left_is_called_off_and_the_span_placed_again():
    current = spans(["n1", "n1", "n2", "n2"], {1: "n3"})
    moves = place(current, {"n1": "", "n2": ""}, {}, 0, 100)
    assert [(m.span.span, m.to, m.now) for m in moves] == [(1, None, False)]
    # the owner died before handing it over: it goes straight to where it was bound
    current = spans(["n1", "n1", "n2", "n2"], {1: "n2"})
    moves = place(current, {"n2": "", "n3": ""}, {"n1": 99}, 0, 100)
    assert (1, "n2", True) in [(m.span.span, m.to, m.now) for m in moves]


def test_no_live_node_moves_nothing():
    assert place(spans(["n1", None]), {}, {"n1": 0}, 0, 100) == []


def test_ties_go_to_the_node_holding_fewest_spans_of_other_jobs():
    # a job of two spans over three nodes: not the node that already holds most of the other jobs' spans
    moves = place(spans([None, None]), {"n0": "", "n1": "", "n2": ""}, {}, 0, 100, {"n0": 5, "n1": 1, "n2": 0})
    assert sorted(m.to for m in moves) == ["n1", "n2"]


# -- homes and localities ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "home, nodes, reason, allowed",
    [
        # replicas: every tier of the home, in any order; spread over all of them
        ("region=us-east1", FOUR, "home", {"e1", "e2"}),
        ("region=us-east1,zone=b", FOUR, "home", {"e2"}),
        ("zone=a,region=us-west1", FOUR, "home", {"w1"}),
        # no replica live: the nodes sharing the most tiers from the first
        ("region=us-east1,zone=c", FOUR, "closest", {"e1", "e2"}),
        ("region=us-west1,zone=b", FOUR, "closest", {"w1"}),
        # tiers count in order: zone=a first shares nothing with region=...,zone=a
        ("zone=a,region=asia1", FOUR, "any", {"e1", "e2", "w1", "eu"}),
        ("region=asia1", FOUR, "any", {"e1", "e2", "w1", "eu"}),
        # a node with more tiers than the home is still a replica; one with fewer shares the first
        ("region=us-east1,zone=a,rack=9", {"r": "region=us-east1", "x": "region=us-east1,zone=a"}, "closest", {"x"}),
        ("region=us-east1,zone=a", {"r": "region=us-east1,zone=a,rack=1", "x": "region=us-east1"}, "home", {"r"}),
        # a table without a home: anywhere
        (None, FOUR, "any", {"e1", "e2", "w1", "eu"}),
    ],
)
def test_a_span_goes_home_else_to_the_closest_else_anywhere(home, nodes, reason, allowed):
    current = spans([None] * 8, homes=[home] * 8)
    moves = place(current, nodes, {}, 0, 100)
    assert {m.reason for m in moves} == {reason}
    where = Counter(after(current, moves).values())
    assert set(where) == allowed
    assert max(where.values()) - min(where.values()) <= 1  # evenly over the allowed nodes


def test_closest_ties_go_to_the_least_loaded_node():
    current = spans(["e1", "e1", "e2", None], homes=[EAST_A, EAST_A, EAST_B, "region=us-east1,zone=c"])
    moves = place(current, FOUR, {}, 0, 100)
    assert [(m.span.span, m.to, m.reason) for m in moves] == [(3, "e2", "closest")]


def test_regions_are_emitted_from_their_region_and_a_dead_regions_spans_go_to_the_closest():
    homes = ["region=us-east1"] * 4 + ["region=us-west1"] * 2 + ["region=europe-west1"] * 2
    current = spans([None] * 8, homes=homes)
    placed = after(current, place(current, FOUR, {}, 0, 100))
    assert [placed[i] for i in range(8)][4:] == ["w1", "w1", "eu", "eu"]
    assert Counter(placed[i] for i in range(4)) == {"e1": 2, "e2": 2}
    # the europe node dies: its spans go to the least loaded node (no node shares a tier)
    now = spans([placed[i] for i in range(8)], homes=homes, reason="home")
    nodes = {n: loc for n, loc in FOUR.items() if n != "eu"}
    moves = place(now, nodes, {"eu": 99}, 0, 100)
    assert [(m.span.span, m.to, m.reason, m.now) for m in moves] == [(6, "e1", "any", True), (7, "e2", "any", True)]
    # it comes back: they go home at their owners' next batch boundaries
    back = spans([after(now, moves)[i] for i in range(8)], homes=homes)
    moves = place(back, FOUR, {}, 0, 100)
    assert sorted((m.span.span, m.to, m.reason, m.now) for m in moves) == [
        (6, "eu", "home", False),
        (7, "eu", "home", False),
    ]


def test_an_east_node_joining_takes_east_spans_only():
    homes = ["region=us-east1"] * 6 + ["region=us-west1"] * 2
    nodes = {"e1": EAST_A, "w1": WEST_A}
    current = spans(["e1"] * 6 + ["w1"] * 2, homes=homes)
    assert place(current, nodes, {}, 0, 100) == []
    moves = place(current, {**nodes, "e2": EAST_B}, {}, 0, 100)
    assert len(moves) == 3 and {m.to for m in moves} == {"e2"} and all(m.span.span < 6 for m in moves)


def test_balanced_simple_bounds_every_node_by_its_share():
    homes = ["region=us-east1"] * 18 + ["region=us-west1"] * 2
    nodes = {"e1": EAST_A, "w1": WEST_A, "w2": "region=us-west1,zone=b"}
    current = spans([None] * 20, homes=homes)
    default = after(current, place(current, nodes, {}, 0, 100))
    assert Counter(default.values())["e1"] == 18  # the default keeps every span at home
    settled = spans([default[i] for i in range(20)], homes=homes)
    moves = place(settled, nodes, {}, 0, 100, strategy="balanced_simple")
    cap = math.ceil(1.05 * 20 / 3)
    assert max(Counter(after(settled, moves).values()).values()) <= cap
    assert len(moves) == 18 - cap and all(m.reason == "balanced" and not m.now for m in moves)
    # once handed over, the spans away from home stay: going home would break the bound
    owners = after(settled, moves)
    handed = spans([owners[i] for i in range(20)], homes=homes)
    assert place(handed, nodes, {}, 0, 100, strategy="balanced_simple") == []
