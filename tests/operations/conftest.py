"""operations/: what people running feeds watch and read: a node's Prometheus metrics scraped while a workload
commits, progress on a terminal, the docs site in a real headless Chromium. Each test starts what it needs
(a `feedctl run` process, a webhook endpoint, a browser) and stops it. Marked `operations` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "operations", "slow")
