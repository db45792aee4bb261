"""Randomized schedules for the nemesis, drawn from a seed so that a failing run can be replayed exactly.

A run is a series of rounds, then a final catch-up and `verify` of every feed. In each round a
`feedctl run --follow` process runs while the workload commits in a burst (or stays idle); the round ends
with the runner SIGKILLed at a fault point or after a random time, or stopped cleanly. A feed may be paused
during a round and resumed after it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from feedctl.testing.faults import POINTS


@dataclass(frozen=True)
class Round:
    kill: str | None  # `after-emit:2` (a fault point, n-th time), `timer:6.5` (SIGKILL after seconds), None
    seconds: float  # the round's length when nothing kills the runner first (with a fault point: until it is reached)
    burst: float  # seconds of workload in the round; 0 is an idle round
    rate: float  # commits per second during the burst
    pause: str | None  # a feed paused during the round and resumed after it
    pause_at: float = 0.0


@dataclass(frozen=True)
class Schedule:
    seed: int
    batch_rows: int
    file_size: str
    rounds: tuple[Round, ...]

    def describe(self) -> str:
        kills = sum(r.kill is not None for r in self.rounds)
        return f"{len(self.rounds)} rounds, {kills} kills, batch_rows {self.batch_rows}, file_size {self.file_size}"


def make_schedule(seed: int, rounds: int, feeds: list[str]) -> Schedule:
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        seconds = rng.uniform(10, 16)  # a runner needs 5-10 s to start Spark
        kind = rng.choice(["point", "point", "timer", "clean"])
        kill = None
        if kind == "point":
            kill = f"{rng.choice(POINTS)}:{rng.randint(1, 3)}"
        elif kind == "timer":
            kill = f"timer:{rng.uniform(2, seconds):.1f}"
        burst = rng.choice([0.0, rng.uniform(2, seconds)])
        pause = rng.choice([None, None, rng.choice(feeds)])
        out.append(
            Round(
                kill,
                round(seconds, 1),
                round(burst, 1),
                rng.choice([2.0, 5.0, 10.0]),
                pause,
                round(rng.uniform(1, seconds), 1),
            )
        )
    return Schedule(seed, rng.choice([10, 100, 10_000]), rng.choice(["2KiB", "64KiB", "16MiB"]), tuple(out))
