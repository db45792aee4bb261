"""nodes/: several `feedctl run --follow` processes (nodes) sharing one state store, killed, stopped and
drained. Nothing here uses a Spark session in the test process. Marked `nodes` and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "nodes", "slow")


@pytest.fixture(params=["sqlite", "postgresql"])
def demo_project(request, tmp_path) -> Path:
    """The demo project, its state store SQLite (one host) or a private PostgreSQL server (several hosts)."""
    from support import copy_demo_project

    root = copy_demo_project(tmp_path / "demo")
    if request.param == "postgresql":
        from feedctl.testing.postgres import postgres

        server = postgres()
        request.addfinalizer(server.stop)
        project = root / "project.yml"
        text = project.read_text()
        assert "state: sqlite:///target/state.db" in text
        project.write_text(text.replace("state: sqlite:///target/state.db", f"state: {server.url}"))
    return root
