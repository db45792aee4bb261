"""spark/: `feedctl run` (and `tail`) in-process over real Delta tables, on one Spark session for the whole
test session. Marked `spark` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "spark", "slow")


@pytest.fixture(scope="session", autouse=True)
def _spark_started(spark):
    """Every test here runs on the session-scoped `spark` (root conftest.py), started once, stopped at the end."""
    return spark
