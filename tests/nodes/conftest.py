"""nodes/: several `feedctl run --follow` processes (nodes) sharing one state store, killed, stopped and
drained. Nothing here uses a Spark session in the test process. Marked `nodes` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "nodes", "slow")
