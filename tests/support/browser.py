"""Debian's Chromium, driven headless by Playwright (which downloads no browser), over pages served on
127.0.0.1: the docs page of a project and the manual."""

from __future__ import annotations

import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"
# As root on a machine with no network: no sandbox, nothing fetched in the background.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def wait_serving(url: str, timeout: float = 60) -> None:
    """Once `url` answers; raises what the last try met after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
