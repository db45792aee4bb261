"""Placement at internet scale, on paper: spans placed over many nodes in many regions by the coordinator's
own code (`coordinator/span_owner.py`), without Spark or node processes.

- place: 100 k spans (homed in 10 regions) over 300 nodes (30 per region, zones a, b, c), all new: the
  seconds `place` takes, and the spread (spans per node, least and most);
- dies: one node dies: seconds, spans moved, and the minimum (the spans it held);
- joins: a node joins a region: seconds, spans moved, and the minimum (the spans the new node ends with,
  as every move goes to it);
- region down: every node of one region dies: its spans go to the other regions' nodes;
- balanced_simple: the same placement from scratch under that strategy, and the most spans on a node
  against its bound ceil(1.05 × spans / nodes);
- writes per checkpoint: a batch emitted by every node and taken into the high-water mark, against a real
  state store (SQLite): statements and rows written, for several node and span counts. Each node records
  its spans in one transaction, a statement per table and thousand spans.

    .venv/bin/python bench/placement.py [--spans 100000 --nodes 300 --regions 10]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from sqlalchemy import event  # noqa: E402

from feedctl.coordinator import fenced  # noqa: E402
from feedctl.coordinator.span_owner import place  # noqa: E402
from feedctl.job.definition import JobDefinition  # noqa: E402
from feedctl.state import batch_intents, jobs, spans  # noqa: E402
from feedctl.state.spans import Span  # noqa: E402
from feedctl.state.store import StateStore  # noqa: E402
from feedctl.units import Hlc  # noqa: E402


def cluster(nodes: int, regions: int) -> dict[str, str]:
    return {f"n{i:04d}": f"region=r{i % regions},zone={'abc'[i // regions % 3]}" for i in range(nodes)}


def new_spans(count: int, regions: int) -> list[Span]:
    return [Span("t", i, None, None, 0, Hlc(0), "", None, f"region=r{i % regions}") for i in range(count)]


def timed(*args, **kwargs):
    started = time.perf_counter()
    moves = place(*args, **kwargs)
    return moves, time.perf_counter() - started


def applied(current: list[Span], moves) -> list[Span]:
    """The spans once the moves are done, hand-overs included."""
    to = {m.span.key: m for m in moves}
    return [
        replace(s, node=to[s.key].to, moving_to=None, reason=to[s.key].reason) if s.key in to else s for s in current
    ]


def spread(current: list[Span], nodes: dict[str, str]) -> tuple[int, int]:
    held = Counter(s.node for s in current)
    return min(held.get(n, 0) for n in nodes), max(held.get(n, 0) for n in nodes)


def row(what: str, seconds: float, moved: int, minimum: int | str, note: str) -> None:
    print(f"{what:<16} {seconds:>9.3f} {moved:>8} {str(minimum):>8}  {note}")


def placement(count: int, node_count: int, regions: int) -> None:
    nodes = cluster(node_count, regions)
    print(f"{count} spans, {node_count} nodes, {regions} regions")
    print(f"{'step':<16} {'seconds':>9} {'moved':>8} {'minimum':>8}  spread (spans per node)")
    moves, seconds = timed(new_spans(count, regions), nodes, {}, 0, 0)
    current = applied(new_spans(count, regions), moves)
    low, high = spread(current, nodes)
    homes = Counter(m.reason for m in moves)
    row("place", seconds, len(moves), count, f"{low}–{high}; {dict(homes)}")

    dead = "n0000"
    held = sum(1 for s in current if s.node == dead)
    alive = {n: where for n, where in nodes.items() if n != dead}
    moves, seconds = timed(current, alive, {dead: 0}, 0, 1)
    current = applied(current, moves)
    same_region = all(nodes[m.to].split(",")[0] == nodes[dead].split(",")[0] for m in moves)
    row(
        "dies",
        seconds,
        len(moves),
        held,
        f"{spread(current, alive)[0]}–{spread(current, alive)[1]}; "
        f"{'all to its region' if same_region else 'some left its region'}",
    )

    joined = {**alive, "new": nodes[dead]}
    moves, seconds = timed(current, joined, {}, 0, 2)
    current = applied(current, moves)
    gained = sum(1 for s in current if s.node == "new")
    row("joins", seconds, len(moves), gained, f"{spread(current, joined)[0]}–{spread(current, joined)[1]}")

    region = nodes[dead].split(",")[0]
    rest = {n: where for n, where in joined.items() if not where.startswith(region + ",")}
    lost = sum(1 for s in current if s.node not in rest)
    moves, seconds = timed(current, rest, {n: 0 for n in joined if n not in rest}, 0, 3)
    row("region down", seconds, len(moves), lost, f"reasons {dict(Counter(m.reason for m in moves))}")

    moves, seconds = timed(new_spans(count, regions), nodes, {}, 0, 0, strategy="balanced_simple")
    current = applied(new_spans(count, regions), moves)
    bound = math.ceil(1.05 * count / node_count)
    row(
        "balanced_simple",
        seconds,
        len(moves),
        count,
        f"{spread(current, nodes)[0]}–{spread(current, nodes)[1]} (bound {bound})",
    )


def writes(node_counts: list[int], span_counts: list[int]) -> None:
    print("\nwrites per checkpoint (one batch emitted by every node, then the checkpoint)")
    print(f"{'nodes':>6} {'spans':>8} {'transactions':>13} {'statements':>11}")
    for node_count in node_counts:
        for count in span_counts:
            with tempfile.TemporaryDirectory() as folder:
                store = StateStore(f"sqlite:///{folder}/state.db", folder)
                with store.transaction() as conn:
                    job = jobs.create_job(
                        conn,
                        "bench",
                        "x",
                        JobDefinition(("t",), None, {}, "out"),
                        "file://x",
                        Hlc(1),
                        {"t": (0, count)},
                    )
                    spans.ensure(conn, job.job_id, {"t": count}, 0, Hlc(1))
                    epoch = jobs.claim_lease(conn, job.job_id, "n0/1", 60)
                    intent = fenced.cut(conn, job.job_id, epoch, "changes", Hlc(2), {"t": (0, 1)})
                    for s in spans.of_job(conn, job.job_id):
                        spans.assign(conn, job.job_id, s, f"n{s.span % node_count}", "any")
                counts = Counter()

                @event.listens_for(store.engine, "after_cursor_execute")
                def counted(conn, cursor, statement, parameters, context, executemany):
                    if not statement.lstrip().upper().startswith(("SELECT", "BEGIN", "PRAGMA")):
                        counts["statements"] += 1

                @event.listens_for(store.engine, "begin")
                def begun(conn):
                    counts["transactions"] += 1

                for n in range(node_count):
                    mine = [("t", s) for s in range(n, count, node_count)]
                    with store.transaction() as conn:
                        spans.emitted(conn, [spans.Emitted(job.job_id, f"n{n}", mine, 1, Hlc(2), 0)])
                with store.transaction() as conn:
                    fenced.checkpoint(conn, job.job_id, epoch, Hlc(2), [intent])
                    done = batch_intents.last_done(conn, job.job_id)
                    moved = sum(1 for s in spans.of_job(conn, job.job_id) if s.batch_seq == 1)
                store.close()
            assert done == 1 and moved == count, "every span emitted, the batch checkpointed"
            print(f"{node_count:>6} {count:>8} {counts['transactions']:>13} {counts['statements']:>11}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--regions", type=int, default=10)
    args = parser.parse_args()
    placement(args.spans, args.nodes, args.regions)
    writes([3, 30, 300], [1_000, 10_000, 100_000])


if __name__ == "__main__":
    main()
