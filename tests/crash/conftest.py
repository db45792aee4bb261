"""crash/: `feedctl run` as real processes (each with its own Spark), SIGKILLed, SIGTERMed, paused and
restarted, and the nemesis. Nothing here uses a Spark session in the test process. Marked `crash` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "crash", "slow")
