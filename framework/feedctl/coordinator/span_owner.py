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

import heapq
import math
from dataclasses import dataclass, replace

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


def describe(moves: list[Move]) -> str:
    """Moves for people, grouped by node and why: `movr.rides/0,1 movr.users/0 → n1 (home: new)`."""
    groups: dict[tuple, dict[str, list[int]]] = {}
    for m in moves:
        groups.setdefault((m.to, m.reason, m.cause), {}).setdefault(m.span.table, []).append(m.span.span)
    return "; ".join(
        " ".join(f"{table}/{','.join(map(str, sorted(ids)))}" for table, ids in sorted(tables.items()))
        + f" → {to} ({reason}: {cause})"
        for (to, reason, cause), tables in groups.items()
    )


def place(
    spans: list[Span],
    nodes: dict[str, str],
    last_live: dict[str, float],
    grace: float,
    now: float,
    elsewhere: dict[str, int] | None = None,
    strategy: str = "default",
) -> list[Move]:
    """The moves that place every span on one of `nodes` (eligible node → its locality), fewest first.
    `last_live` gives, for registered nodes that are not live, when they last were; `elsewhere`, the spans
    each node holds of other jobs, which break ties, so that jobs with fewer spans than nodes do not all
    pile on the same node. Each home's candidates keep a heap of their loads, so placing 100 k spans over
    hundreds of nodes takes well under a second."""
    if not nodes:
        return []
    elsewhere = elsewhere or {}
    order = {n: i for i, n in enumerate(sorted(nodes))}
    load = dict.fromkeys(order, 0)
    groups: dict[str | None, _Group] = {}  # per home: where its spans may go, and why
    member_of: dict[str, list[_Group]] = {n: [] for n in order}  # per node: the groups it is a candidate of

    def rank(node: str) -> tuple[int, int, int]:
        return load[node], elsewhere.get(node, 0), order[node]

    def group(home: str | None) -> _Group:
        found = groups.get(home)
        if found is None:
            reason, among = _candidates(home, nodes, order)
            found = groups[home] = _Group(reason, among, [(rank(n), n) for n in among])
            heapq.heapify(found.heap)
            for n in among:
                member_of[n].append(found)
        return found

    def least(g: _Group) -> str:
        while True:  # entries whose node's load changed since are stale: a fresher one was pushed
            entry, node = g.heap[0]
            if entry == rank(node):
                return node
            heapq.heappop(g.heap)

    def changed(node: str) -> None:
        for g in member_of[node]:
            heapq.heappush(g.heap, (rank(node), node))

    # balanced_simple: no node above its share (and a little); the default: no bound but the homes
    cap = math.ceil((1 + SENSITIVITY) * len(spans) / len(load)) if strategy == "balanced_simple" else math.inf
    moves, orphans = [], []
    settled: dict[str, dict[str | None, list[Span]]] = {n: {} for n in order}  # node → home → spans, in order
    for s in spans:
        if s.node in load:
            if s.moving_to is not None and s.moving_to not in load:  # bound for a node that left: it stays
                moves.append(Move(s, None, s.reason, now=False))
                s = replace(s, moving_to=None)
            load[s.moving_to or s.node] += 1
            if s.moving_to is None:
                settled[s.node].setdefault(s.home, []).append(s)
        elif s.node is not None and s.node in last_live and now - last_live[s.node] < grace:
            continue  # its node may come back for it
        else:
            orphans.append(s)

    def move(s: Span, to: str, reason: str, at_once: bool, cause: str) -> None:
        if not at_once:
            settled[s.node][s.home].remove(s)
            load[s.node] -= 1
            changed(s.node)
        load[to] += 1
        changed(to)
        moves.append(Move(s, to, reason, at_once, cause))

    for s in orphans:
        g = group(s.home)
        to = s.moving_to if s.moving_to in g.among else least(g)
        if s.node is None:  # new, or released by its node (drained)
            cause = s.note or "new"
        else:
            cause = f"{s.node} is not live" if s.node in last_live else f"{s.node} left"
        move(s, to, g.reason, True, cause)
    for s in sorted((s for held in settled.values() for ss in held.values() for s in ss), key=lambda s: s.key):
        g = group(s.home)  # a closer node is live now: the span goes there, if it has room
        to = least(g)
        if s.node not in g.among and load[to] < cap:
            move(s, to, g.reason, False, f"closer to {s.home} than {s.node}")
    _even_out(settled, group, least, rank, load, cap, move)
    if strategy == "balanced_simple":
        while max(load.values()) > cap:
            most, least_loaded = max(load, key=rank), min(load, key=rank)
            given = sorted((s for ss in settled[most].values() for s in ss), key=lambda s: s.key)
            if not given:  # only spans on their way to it: they arrive first
                break
            s = next((s for s in given if least_loaded in group(s.home).among), given[-1])
            move(s, least_loaded, "balanced", False, f"{most} holds more than {cap}")
    return moves


@dataclass
class _Group:
    reason: str  # home, closest or any
    among: frozenset[str]
    heap: list  # (rank, node), possibly stale


def _candidates(home: str | None, nodes: dict[str, str], order: dict[str, int]) -> tuple[str, frozenset[str]]:
    """Where a span of this home may go, and why."""
    if home:
        replicas = frozenset(n for n in order if locality.matches(home, nodes[n]))
        if replicas:
            return "home", replicas
        closeness = {n: locality.shared(home, nodes[n]) for n in order}
        best = max(closeness.values())
        if best:
            return "closest", frozenset(n for n in order if closeness[n] == best)
    return "any", frozenset(order)


def _even_out(settled, group, least, rank, load, cap, move) -> None:
    """Even out each home's spans over its nodes: one span at a time from the most loaded node that can
    give one (its first span, by table and span, whose home has a node at least two spans lighter)."""
    givers = [(tuple(-x for x in rank(n)), n) for n in settled if any(settled[n].values())]
    heapq.heapify(givers)
    stuck = []
    while givers:
        entry, node = heapq.heappop(givers)
        if entry != tuple(-x for x in rank(node)) or not any(settled[node].values()):
            continue  # stale, or nothing left to give
        best = None
        for home, held in settled[node].items():
            if held:
                g = group(home)
                to = least(g)
                if load[node] - load[to] > 1 and load[to] < cap and (best is None or held[0].key < best[0].key):
                    best = held[0], to, g.reason
        if best is None:
            stuck.append(node)
            continue
        s, to, reason = best
        move(s, to, reason, False, f"balanced from {s.node}")
        for n in [node, to, *stuck]:  # a lighter node may let a stuck one give after all
            heapq.heappush(givers, (tuple(-x for x in rank(n)), n))
        stuck = []
