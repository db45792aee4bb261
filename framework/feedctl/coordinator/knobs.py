"""Hooks a test injects into a run through its settings (CockroachDB's `TestingKnobs`): the coordinator and
the node call them at the points where a guarantee is most at risk, and they do nothing unless a test set
them. `feedctl run --testing-kill-at POINT[:N]` (a hidden option) sets one that kills the process there
(`testing/faults.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# after-intent: a batch is cut, nothing of it emitted; after-emit: a node's files are written, its spans'
# frontiers not yet recorded; after-checkpoint: the high-water mark moved, the resolved files not yet written;
# after-resolved-file: one sink endpoint has its resolved file, the others not yet.
POINTS = ("after-intent", "after-emit", "after-checkpoint", "after-resolved-file")


def _nothing(point: str) -> None:
    pass


@dataclass(frozen=True)
class TestingKnobs:
    __test__ = False  # not a test class, whatever pytest thinks of its name

    reached: Callable[[str], None] = _nothing  # called as the run passes each of POINTS
