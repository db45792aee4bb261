"""connect/: feeds run through a Spark Connect server, pyspark's own, started as a process of its own on
127.0.0.1 (`feedctl.testing.connect_server`); `feedctl run` as real processes, and in-process with the classic
API made unusable. Marked `connect` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "connect", "slow")
