"""A --follow node's ticker round for N steady jobs, on a SQLite state store: each round records a new version of
every job's table, cuts a batch of it (one transaction), then takes the batch into every job's mark (another), as
`node/ticker.py` does when the node's watch finds a commit read by all of them (`event_times.record`,
`batch_intents.cut`, `checkpoints.take`). Alone
here; on a node its time is interpreter time the node's hundreds of other threads wait for.

    .venv/bin/python bench/ticker_round.py [--jobs 500] [--rounds 20]

The last line is `ticker round: jobs=<n> cpu=<ms> ms wall=<ms> ms statements=<k>`, per round (after a first one,
which compiles the statements)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from feedctl import options  # noqa: E402
from feedctl.state import batch_intents, checkpoints, event_times, jobs  # noqa: E402
from feedctl.state.event_times import Recorded  # noqa: E402
from feedctl.state.jobs import JobDefinition  # noqa: E402
from feedctl.state.store import StateStore  # noqa: E402
from feedctl.units import Hlc  # noqa: E402

TABLE = "s.t"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="ticker-round-")
    store = StateStore(f"sqlite:///{folder}/state.db", folder)
    definition = JobDefinition(tables=(TABLE,), sql=None, options=options.resolve({}, None, False), sink="out")
    with store.transaction() as conn:
        made = [
            jobs.create_job(conn, f"f{i}", "sha256:x", definition, "file://x", Hlc(1), {TABLE: (0, 1)})
            for i in range(args.jobs)
        ]
        held = [(job.job_id, jobs.claim_lease(conn, job.job_id, "n/1", 3600)) for job in made]
    statements = []
    event.listen(Engine, "before_cursor_execute", lambda *a: statements.append(1))

    def round_(version: int) -> None:
        commit = Hlc(version * 10)
        with store.transaction(node=True) as conn:
            written = jobs.fence(conn, held)
            event_times.record(conn, {j: [Recorded(TABLE, version, commit.wall, commit, 10, 100)] for j in written})
            batch = batch_intents.NewBatch(commit, {TABLE: (version - 1, version)})
            cut = batch_intents.cut(conn, {j: [batch] for j in written})
        with store.transaction(node=True) as conn:
            written = jobs.fence(conn, held)
            checkpoints.take(conn, {j: cut[j] for j in written})

    round_(1)
    statements.clear()
    cpu, wall = time.thread_time(), time.perf_counter()
    for version in range(2, args.rounds + 2):
        round_(version)
    cpu, wall = (time.thread_time() - cpu) / args.rounds, (time.perf_counter() - wall) / args.rounds
    store.close()
    print(
        f"ticker round: jobs={args.jobs} cpu={cpu * 1000:.1f} ms wall={wall * 1000:.1f} ms "
        f"statements={len(statements) / args.rounds:.0f}"
    )


if __name__ == "__main__":
    main()
