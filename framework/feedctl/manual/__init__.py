"""The manual: its reference generated from the code (`reference`), and where the manual is read.

The manual is built from `docs/` by `make docs` and served by `make docs-serve` at `DEFAULT_URL`; a copy
published elsewhere is named by `FEEDCTL_MANUAL_URL`, which the docs page of a project links to."""

from __future__ import annotations

import os

DEFAULT_URL = "http://127.0.0.1:8000/"


def manual_url() -> str:
    """The manual's address, ending in `/`."""
    url = os.environ.get("FEEDCTL_MANUAL_URL") or DEFAULT_URL
    return url if url.endswith("/") else url + "/"
