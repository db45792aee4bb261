"""When a resolved timestamp is due (each sink writes its own: `Sink.write_resolved`)."""

from __future__ import annotations

import math

from feedctl.options import Options
from feedctl.units import Hlc, parse_duration


def interval(options: Options) -> float | None:
    """Seconds between resolved timestamps, or None when the feed emits none. As in CockroachDB, never more
    often than `min_checkpoint_frequency` either."""
    resolved = options.resolved
    if resolved is None or resolved is False:
        return None
    every = 0.0 if resolved is True else parse_duration(resolved)
    return max(every, parse_duration(options.min_checkpoint_frequency))


def due(options: Options, high_water: Hlc, last_resolved: Hlc, last_at: float | None, now: float) -> bool:
    every = interval(options)
    if every is None or high_water <= last_resolved or high_water.wall == 0:
        return False
    return last_at is None or now - last_at >= every


# A tick scheduled on the grid counts as due at its instant: the grid's points are sums of floats, and a
# tick one rounding early would wait a whole interval more for its resolved timestamp.
GRID_SLACK = 0.001


def next_tick(every: float, after: float) -> float:
    """The first instant at or after `after` (wall clock) on the grid of `every` seconds: a node's steady jobs
    of one interval then tick at the same instants, and their writes share transactions (`GroupCommit`)."""
    return math.ceil(after / every) * every if every > 0 else after
