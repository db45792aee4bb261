"""Options changed in place on a running job (`IN_PLACE_OPTIONS`: `diff`, `resolved`, batch bounds...), as
CockroachDB's `ALTER CHANGEFEED ... SET`. A change takes effect from the first batch not yet cut when it is
recorded: a batch is emitted under one set of options wherever and however often it is emitted, so a re-run
on another node rewrites the same files, and a file never mixes messages of two settings.

The job's definition holds the options in force now and, per change, what it replaced (`option_changes`), so
the options of any batch, or of any event timestamp, can be told: a batch cut before a change has every
event timestamp at or below the newest target cut then (`after`), those cut later are above it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from feedctl.options import Options
from feedctl.units import Hlc


@dataclass(frozen=True)
class OptionChange:
    from_batch: int  # the first batch emitted under `now`
    after: Hlc | None  # the newest target cut before it: later event timestamps are under `now` (None: all)
    was: dict
    now: dict
    node: str = ""

    def to_json(self) -> dict:
        after = [self.after.wall, self.after.logical] if self.after else None
        return {"from_batch": self.from_batch, "after": after, "was": self.was, "now": self.now, "node": self.node}

    @staticmethod
    def from_json(d: dict) -> "OptionChange":
        return OptionChange(
            d["from_batch"], Hlc(*d["after"]) if d.get("after") else None, d["was"], d["now"], d.get("node", "")
        )

    def describe(self) -> str:
        return ", ".join(f"{k}: {show(self.was.get(k))} → {show(v)}" for k, v in sorted(self.now.items()))


def show(value) -> str:
    """An option's value as YAML would write it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def differing(current: Options, wanted: Options) -> tuple[dict, dict]:
    """The in-place options `wanted` sets otherwise than `current`: (their values now, the values wanted), as
    an `OptionChange` stores them."""
    was, now = current.in_place(), wanted.in_place()
    names = [k for k in was if was[k] != now[k]]
    return {k: was[k] for k in names}, {k: now[k] for k in names}
