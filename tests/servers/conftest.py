"""servers/: feeds into real servers on 127.0.0.1 — moto S3, fake GCS, Azurite, Kafka (Tansu), a webhook
endpoint — run in-process on one Spark session for the whole test session. Marked `servers` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "servers", "slow")


@pytest.fixture(scope="session", autouse=True)
def _spark_started(spark):
    """Every test here runs on the session-scoped `spark` (root conftest.py), started once, stopped at the end."""
    return spark
