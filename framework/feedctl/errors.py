"""Errors a run ends with, said to the user as they are."""

from __future__ import annotations


class RunError(Exception):
    """A feed cannot run as asked; the message says why and what to do."""
