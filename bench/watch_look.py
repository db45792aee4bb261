"""A --follow node's look at the state store for every job it works (`node/watch.py`), for N jobs of two spans
each on a private PostgreSQL server (or SQLite), as three nodes working every feed see them: idle (the ticker's
marks and the leases' renewals written between looks, nothing a look reacts to), and busy (between looks, a
batch cut and another node's share of it recorded for a tenth of the jobs). The client's CPU (this process:
the look's statements, their results, the marks) and the wall clock, per look.

    .venv/bin/python bench/watch_look.py [--jobs 1000] [--looks 40] [--state postgresql|sqlite]

With `PYTHONPATH` set to another checkout's `framework/`, the same looks of that code (which may read every
row at every look: `watched.job_marks`). The last line is `watch look: jobs=<n> idle cpu=<ms> ms wall=<ms> ms
busy cpu=<ms> ms wall=<ms> ms`, medians."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from feedctl import options  # noqa: E402
from feedctl.coordinator import fenced  # noqa: E402
from feedctl.coordinator.lease import holder_id  # noqa: E402
from feedctl.state import checkpoints, jobs, nodes, spans  # noqa: E402
from feedctl.state.batch_intents import IntentKind  # noqa: E402
from feedctl.state.jobs import JobDefinition  # noqa: E402
from feedctl.state.store import StateStore  # noqa: E402
from feedctl.testing.postgres import postgres  # noqa: E402
from feedctl.units import Hlc  # noqa: E402

TABLE = "s.t"
NODES = ("n0", "n1", "n2")


def setup(store: StateStore, count: int) -> list[tuple[int, int, str]]:
    """`count` jobs, a third coordinated by each node, their two spans on two nodes, every node's view of
    every feed: (job, epoch, coordinator) each."""
    definition = JobDefinition(tables=(TABLE,), sql=None, options=options.resolve({}, None, False), sink="out")
    made = []
    with store.transaction() as conn:
        for node in NODES:
            nodes.register(conn, node, "", feeds=tuple(f"f{i}" for i in range(count)))
        for i in range(count):
            job = jobs.create_job(conn, f"f{i}", "sha256:x", definition, "file://x", Hlc(1), {TABLE: (0, 2)})
            owner = NODES[i % 3]
            epoch = jobs.claim_lease(conn, job.job_id, holder_id(owner), 3600)
            spans.ensure(conn, job.job_id, {TABLE: 2}, 0, Hlc(1))
            for span, node in zip(spans.of_job(conn, job.job_id), (owner, NODES[(i + 1) % 3])):
                spans.assign(conn, job.job_id, span, node, "bench")
            for node in NODES:
                nodes.publish_view(conn, node, f"f{i}", "sha256:x", loaded=1)
            made.append((job.job_id, epoch, owner))
    return made


def idle_writes(store: StateStore, made: list, tick: int) -> None:
    """What idle nodes write between looks: every job's mark moved, every lease renewed."""
    with store.transaction() as conn:
        for owner in NODES:
            held = [(j, e) for j, e, o in made if o == owner]
            jobs.fence(conn, held, **checkpoints.mark_values(Hlc(tick * 1_000_000_000)))
            jobs.renew_leases(conn, held, holder_id(owner), 3600)


def busy_writes(store: StateStore, made: list, tick: int, seq: dict) -> None:
    """And a batch cut and emitted on both nodes for a tenth of the jobs."""
    idle_writes(store, made, tick)
    with store.transaction() as conn:
        for job_id, epoch, owner in made[tick % 10 :: 10]:
            seq[job_id] = seq.get(job_id, 0) + 1
            intent = fenced.cut(
                conn, job_id, epoch, IntentKind.CHANGES, Hlc(tick * 1_000_000_000 + 1), {TABLE: (0, seq[job_id])}
            )
            for span in spans.of_job(conn, job_id):
                done = spans.Emitted(
                    job_id, span.node, [span.key], intent.batch_seq, intent.target, intent.batch_seq - 1
                )
                spans.emitted(conn, [done])


def looker(node: str):
    """One look of node `node` at every job, as this code's watch reads it."""
    try:
        from feedctl.node.watch_marks import WatchMarks
    except ImportError:  # code of before the marks moved to the node (`state/watched.py`)
        from feedctl.state import watched

        if not hasattr(watched, "Watched"):
            return lambda conn, job_ids: watched.job_marks(conn, job_ids, node, holder_id(node))
        WatchMarks = watched.Watched
    marks = WatchMarks(node, holder_id(node))
    return lambda conn, job_ids: marks.marks(conn, job_ids)


def measure(store: StateStore, made: list, looks: int, writes) -> tuple[float, float]:
    """Medians of one node's looks, CPU and wall, in milliseconds, with `writes` between them."""
    look, job_ids = looker("n0"), [j for j, _, _ in made]
    cpu, wall = [], []
    for tick in range(looks + 1):
        writes(tick)
        c, w = time.process_time(), time.perf_counter()
        with store.reading(node=True) as conn:
            look(conn, job_ids)
        if tick:  # the first compiles the statements and reads everything
            cpu.append((time.process_time() - c) * 1000)
            wall.append((time.perf_counter() - w) * 1000)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--looks", type=int, default=40)
    parser.add_argument("--state", choices=["postgresql", "sqlite"], default="postgresql")
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.state == "postgresql":
            store = StateStore(stack.enter_context(postgres()).url)
        else:
            folder = tempfile.mkdtemp(prefix="watch-look-")
            store = StateStore(f"sqlite:///{folder}/state.db", folder)
        stack.callback(store.close)
        made = setup(store, args.jobs)
        idle = measure(store, made, args.looks, lambda tick: idle_writes(store, made, tick + 2))
        seq: dict = {}
        busy = measure(store, made, args.looks, lambda tick: busy_writes(store, made, tick + 100, seq))
    print(
        f"watch look: jobs={args.jobs} idle cpu={idle[0]:.1f} ms wall={idle[1]:.1f} ms "
        f"busy cpu={busy[0]:.1f} ms wall={busy[1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
