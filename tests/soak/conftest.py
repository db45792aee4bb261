"""soak/: the nemesis, over one runner and over three nodes on each state store: randomized kills, pauses,
drains and project changes while a workload commits, every feed verified. Long by nature, so `make test`
leaves them to `make soak` (their figures are in BENCHMARKS.md); every fault they draw from is proven on its
own in crash/ and nodes/. Marked `soak` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "soak", "slow")
