"""Marks by folder: each folder's conftest.py marks every test collected under it."""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_folder(items: list[pytest.Item], folder: Path, *markers: str) -> None:
    """Add `markers` to each of `items` under `folder` (a collection hook sees every item of the session)."""
    folder = folder.resolve()
    for item in items:
        if folder in item.path.resolve().parents:
            for marker in markers:
                item.add_marker(marker)
