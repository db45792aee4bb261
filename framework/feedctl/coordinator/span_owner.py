"""Which node owns each span of a job. The coordinator places spans on the eligible nodes (live, working the
feed, matching its `execution_locality`), CockroachDB's way:

- a span goes to one of its *replicas*, the nodes whose locality matches its home (`home`), spread evenly
  over them; with no live replica, to the nodes sharing the most tiers with its home in order from the
  first (`closest`); with none sharing a tier, or no home, to any node (`any`); ties to the least loaded;
- a span without an owner, or whose owner is gone, is placed at once; a node that dies keeps its spans for
  `grace` seconds after it was last live (a node restarted meanwhile continues them);
- other moves are hand-overs at the owner's next batch boundary, so no batch is emitted twice, and the
  fewest of them: a span goes home when a replica comes back, spans even out within their homes when a node
  joins, and with `balanced_simple` no node keeps more than ceil(1.05 × spans / nodes) (`balanced`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from feedctl.coordinator import locality
from feedctl.state.spans import Span

SENSITIVITY = 0.05  # balanced_simple's slack over an even share (CockroachDB's balance_range_distribution.sensitivity)


@dataclass(frozen=True)
class Move:
    span: Span
    to: str | None  # None: cancel a hand-over
    reason: str  # home, closest, balanced or any: why `to`
    now: bool  # True: the span changes owner now; False: at its owner's next batch boundary
    cause: str = ""  # why it moves: its owner is not live, left, a closer node joined...


def place(spans: list[Span], nodes: dict[str, str], last_live: dict[str, float], grace: float, now: float,
          elsewhere: dict[str, int] | None = None, strategy: str = "default") -> list[Move]:
    """The moves that place every span on one of `nodes` (eligible node → its locality), fewest first.
    `last_live` gives, for registered nodes that are not live, when they last were; `elsewhere`, the spans
    each node holds of other jobs, which break ties, so that jobs with fewer spans than nodes do not all
    pile on the same node."""
    if not nodes:
        return []
    elsewhere = elsewhere or {}
    load = dict.fromkeys(sorted(nodes), 0)

    def rank(node: str) -> tuple[int, int, str]:
        return load[node], elsewhere.get(node, 0), node

    @lru_cache(maxsize=None)
    def candidates(home: str | None) -> tuple[str, tuple[str, ...]]:
        """Where a span of this home may go, and why."""
        if home:
            replicas = tuple(n for n in load if locality.matches(home, nodes[n]))
            if replicas:
                return "home", replicas
            closeness = {n: locality.shared(home, nodes[n]) for n in load}
            best = max(closeness.values())
            if best:
                return "closest", tuple(n for n in load if closeness[n] == best)
        return "any", tuple(load)

    # balanced_simple: no node above its share (and a little); the default: no bound but the homes
    cap = math.ceil((1 + SENSITIVITY) * len(spans) / len(load)) if strategy == "balanced_simple" else math.inf
    moves, orphans, settled = [], [], []
    for s in spans:
        if s.node in load:
            if s.moving_to is not None and s.moving_to not in load:  # bound for a node that left: it stays
                moves.append(Move(s, None, s.reason, now=False))
                s = replace(s, moving_to=None)
            load[s.moving_to or s.node] += 1
            if s.moving_to is None:
                settled.append(s)
        elif s.node is not None and s.node in last_live and now - last_live[s.node] < grace:
            continue  # its node may come back for it
        else:
            orphans.append(s)

    def move(s: Span, to: str, reason: str, at_once: bool, cause: str) -> None:
        if not at_once:
            settled.remove(s)
            load[s.node] -= 1
        load[to] += 1
        moves.append(Move(s, to, reason, at_once, cause))

    for s in orphans:
        reason, among = candidates(s.home)
        to = s.moving_to if s.moving_to in among else min(among, key=rank)
        if s.node is None:  # new, or released by its node (drained)
            cause = s.note or "new"
        else:
            cause = f"{s.node} is not live" if s.node in last_live else f"{s.node} left"
        move(s, to, reason, True, cause)
    for s in list(settled):  # a closer node is live now: the span goes there, if it has room
        reason, among = candidates(s.home)
        to = min(among, key=rank)
        if s.node not in among and load[to] < cap:
            move(s, to, reason, False, f"closer to {s.home} than {s.node}")
    while True:  # even out each home's spans over its nodes: from the most loaded node that can give one
        best = None
        for s in settled:
            reason, among = candidates(s.home)
            to = min(among, key=rank)
            if load[s.node] - load[to] > 1 and load[to] < cap and (best is None or rank(s.node) > rank(best[0].node)):
                best = s, to, reason
        if best is None:
            break
        s, to, reason = best
        move(s, to, reason, False, f"balanced from {s.node}")
    if strategy == "balanced_simple":
        while max(load.values()) > cap:
            most, least = max(load, key=rank), min(load, key=rank)
            given = [s for s in settled if s.node == most]
            if not given:  # only spans on their way to it: they arrive first
                break
            s = next((s for s in given if least in candidates(s.home)[1]), given[-1])
            move(s, least, "balanced", False, f"{most} holds more than {cap}")
    return moves
