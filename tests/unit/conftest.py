"""unit/: no Spark, no servers, no `feedctl run` process — the quick loop (`make test-quick`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedctl.state import schema
from feedctl.state.store import StateStore
from support.markers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_folder(items, Path(__file__).parent, "unit")


@pytest.fixture(scope="session")
def postgres_url():
    """A private PostgreSQL server for the tests of the state store on both its kinds."""
    from feedctl.testing.postgres import postgres

    with postgres() as server:
        yield server.url


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    """The state store on SQLite (one host) and on PostgreSQL (several hosts), empty."""
    if request.param == "sqlite":
        store = StateStore(f"sqlite:///{tmp_path}/state.db", tmp_path)
    else:
        store = StateStore(request.getfixturevalue("postgres_url"))
        with store.transaction() as conn:  # a clean slate per test: the server outlives it
            for table in reversed(schema.metadata.sorted_tables):
                conn.execute(table.delete())
    yield store
    store.close()
