"""Which node owns each span of a job. The coordinator places spans on the live nodes that work the feed,
evenly: a span without an owner, or whose owner is gone, is placed at once (on the least loaded node); when
a node joins, the fewest spans move to even the load out, each handed over at its owner's next batch
boundary, so no batch is emitted twice. A node that dies keeps its spans for `grace` seconds after it was
last live (a node restarted meanwhile continues them); 0 moves them as soon as it is found dead."""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.state.spans import Span


@dataclass(frozen=True)
class Move:
    span: Span
    to: str | None  # None: cancel a hand-over
    reason: str
    now: bool  # True: the span changes owner now; False: at its owner's next batch boundary


def place(spans: list[Span], nodes: list[str], last_live: dict[str, float], grace: float, now: float,
          elsewhere: dict[str, int] | None = None) -> list[Move]:
    """The moves that place every span on one of `nodes` (the live nodes working the job) and even the load
    out, fewest first. `last_live` gives, for registered nodes that are not live, when they last were;
    `elsewhere`, the spans each node holds of other jobs, which break ties, so that jobs with fewer spans
    than nodes do not all pile on the same node."""
    if not nodes:
        return []
    elsewhere = elsewhere or {}
    load = dict.fromkeys(sorted(nodes), 0)

    def rank(node: str) -> tuple[int, int, str]:
        return load[node], elsewhere.get(node, 0), node

    moves, orphans, settled = [], [], []
    for s in spans:
        if s.node in load:
            if s.moving_to is not None and s.moving_to not in load:  # bound for a node that left: it stays
                moves.append(Move(s, None, "", now=False))
                s = Span(s.table, s.span, s.node, None, s.batch_seq, s.frontier, s.reason, s.assigned_at)
            load[s.moving_to or s.node] += 1
            if s.moving_to is None:
                settled.append(s)
        elif s.node is not None and s.node in last_live and now - last_live[s.node] < grace:
            continue  # its node may come back for it
        else:
            orphans.append(s)
    for s in orphans:
        to = s.moving_to if s.moving_to in load else min(load, key=rank)
        load[to] += 1
        if s.node is None:
            why = f"placed ({s.reason})" if s.reason else "placed"
        else:
            why = f"{s.node} is not live" if s.node in last_live else f"{s.node} left"
        moves.append(Move(s, to, why, now=True))
    while True:
        most = max(load, key=rank)
        least = min(load, key=rank)
        given = [s for s in settled if s.node == most]
        if load[most] - load[least] <= 1 or not given:
            return moves
        s = given[-1]
        settled.remove(s)
        load[most] -= 1
        load[least] += 1
        moves.append(Move(s, least, f"balanced from {most}", now=False))
