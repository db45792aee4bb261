"""Fixtures of every folder. Helpers live in the `support` package (tests/support), never here.

Folders by cost, each marking what it holds (see README.md): unit/, spark/, servers/, crash/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import Cli, copy_demo_project

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test`'s workers, `--dist loadgroup`: the costly folders on one, the rest beside them
    (support/workers.py)."""
    if config.getvalue("dist") == "loadgroup":
        from support.workers import ByCost

        return ByCost(config, log)
    return None


@pytest.fixture
def cli():
    return Cli


@pytest.fixture
def demo_project(tmp_path) -> Path:
    """A copy of the repository's demo project (its files only, no target/)."""
    return copy_demo_project(tmp_path / "demo")


@pytest.fixture
def init_project(tmp_path) -> Path:
    """A project made by `feedctl init`, with its sample Delta table."""
    root = tmp_path / "shop_feeds"
    result = Cli()("init", str(root))
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="session")
def spark():
    """The process's one SparkSession, started as `feedctl run` starts it (the package's `spark_session`, with
    the tests' master and conf), so every in-process run of the session finds it; stopped at the end, and the
    package's cached session cleared, so that nothing goes on with a stopped one."""
    from feedctl.spark.place import SparkPlace
    from support.spark import SPARK, session_module

    session = session_module()
    started = session.spark_session(SparkPlace(SPARK["master"], SPARK["conf"]))
    yield started
    started.stop()
    session._session = None


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 server, its endpoint and credentials in this process's environment (and so in the
    environment of the `feedctl` processes a test starts), never in a Spark server's."""
    from feedctl.testing import devservers

    server = devservers.moto_s3()
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    yield server
    server.stop()
