"""cluster/: a Spark standalone master and workers as processes of their own, each worker in a mount
namespace where the test's folder is hidden, so that executors share no disk with the driver; `feedctl run`
as real processes. Marked `cluster` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "cluster", "slow")
