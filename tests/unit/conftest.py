"""unit/: no Spark, no servers, no `feedctl run` process — the quick loop (`make test-quick`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "unit")
