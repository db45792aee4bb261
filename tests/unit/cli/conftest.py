"""Fixtures of the `feedctl` command's tests (unit/cli/), one file per command; helpers in support.cli.

Exit codes: 0 success; 1 the project has errors (each with code, file, line and column); 2 bad usage.
Tests match codes, exit codes and locations, never message wording.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support import Cli


@pytest.fixture
def init_project(tmp_path) -> Path:
    """A project made by `feedctl init`, with its sample Delta table."""
    root = tmp_path / "shop_feeds"
    result = Cli()("init", str(root))
    assert result.exit_code == 0, result.output
    return root
