"""Randomized schedules for the nemesis, drawn from a seed so that a failing run can be replayed exactly.

A run is a series of rounds, then a final catch-up and `verify` of every feed. In each round a
`feedctl run --follow` process runs while the workload commits in a burst (or stays idle); the round ends
with the runner SIGKILLed at a fault point or after a random time, or stopped cleanly. A feed may be paused
during a round and resumed after it. With sink faults, the Kafka broker one feed writes to may be SIGKILLed
during a round and started again some seconds later (perhaps in a later round, under another runner).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from feedctl.testing.faults import POINTS


@dataclass(frozen=True)
class Round:
    kill: str | None  # `after-emit:2` (a fault point, n-th time), `timer:6.5` (SIGKILL after seconds), None
    seconds: float  # the round's length when nothing kills the runner first (with a fault point: until it is reached)
    burst: float  # seconds of workload in the round; 0 is an idle round
    rate: float  # commits per second during the burst
    pause: str | None  # a feed paused during the round and resumed after it
    pause_at: float = 0.0
    sink_away: SinkAway | None = None  # the broker killed during the round, and for how long


@dataclass(frozen=True)
class SinkAway:
    at: float  # seconds into the round
    seconds: float  # how long the broker stays down: it may outlast the round and its runner


@dataclass(frozen=True)
class Schedule:
    seed: int
    batch_rows: int
    file_size: str
    rounds: tuple[Round, ...]

    @property
    def sink_faults(self) -> bool:
        return any(r.sink_away for r in self.rounds)

    def describe(self) -> str:
        kills = sum(r.kill is not None for r in self.rounds)
        away = sum(r.sink_away is not None for r in self.rounds)
        return (
            f"{len(self.rounds)} rounds, {kills} kills, "
            + (f"{away} sink outages, " if away else "")
            + f"batch_rows {self.batch_rows}, file_size {self.file_size}"
        )


def make_schedule(seed: int, rounds: int, feeds: list[str], sink_faults: bool = False) -> Schedule:
    """The schedule of `seed`; with `sink_faults`, a broker outage in most rounds (drawn apart, so that a seed's
    other faults are the same with them as without)."""
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
    schedule = Schedule(seed, rng.choice([10, 100, 10_000]), rng.choice(["2KiB", "64KiB", "16MiB"]), tuple(out))
    if not sink_faults:
        return schedule
    away = random.Random(f"{seed}-sink")

    def outage(r: Round) -> SinkAway | None:
        if away.random() >= 0.8:
            return None
        return SinkAway(round(away.uniform(1, r.seconds), 1), round(away.uniform(2, 25), 1))

    return replace(schedule, rounds=tuple(replace(r, sink_away=outage(r)) for r in schedule.rounds))
