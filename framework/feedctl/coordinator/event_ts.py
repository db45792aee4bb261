"""Event timestamps (the manual's docs/concepts/time.md): each table version gets one, recorded once and
reused forever.

    event_ts(v) = max(commit_ts(v), event_ts(v-1) + 1ns, floor + 1ns)

where `floor` is the job's high-water mark (never below its start) when the version is first seen. Raising
above the floor keeps the guarantee that everything at or below the high-water mark (and so below every
resolved timestamp) has been emitted, even when a commit's own clock lags behind.
"""

from __future__ import annotations

from feedctl.units import Hlc


def assign(commit_ns: list[int], previous: Hlc | None, floor: Hlc) -> list[Hlc]:
    """Event timestamps for consecutive versions with commit times `commit_ns`, after `previous`."""
    out: list[Hlc] = []
    last = previous
    for commit in commit_ns:
        wall = max(commit, floor.wall + 1)
        if last is not None:
            wall = max(wall, last.wall + 1)
        last = Hlc(wall, 0)
        out.append(last)
    return out
