"""What the CLI tests check of a command: no traceback, its diagnostics and checks, the manifest it wrote."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from support.projects import json_lines

TRACEBACK = "Traceback (most recent call last)"
DEMO_FEEDS = {"movr_all", "vehicles_in_use", "ride_ends"}
DEMO_TABLES = ["movr.users", "movr.vehicles", "movr.rides"]
HAS_JAVA = bool(
    os.environ.get("JAVA_HOME") and (Path(os.environ["JAVA_HOME"]) / "bin/java").exists() or shutil.which("java")
)


def assert_clean(result) -> None:
    """No traceback anywhere in what the user sees."""
    for text in (result.stdout, result.stderr):
        assert TRACEBACK not in text, text


def diagnostics(result) -> list[dict]:
    """The diagnostics of a `--log-format json` run (on stderr)."""
    return [d for d in json_lines(result.stderr) if d.get("event") == "diagnostic"]


def manifest(project: Path) -> dict:
    return json.loads((project / "target" / "manifest.json").read_text(encoding="utf-8"))


def set_line(path: Path, prefix: str, new: str) -> None:
    """Replace the first line of `path` starting with `prefix`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    assert hits, (prefix, lines)
    lines[hits[0]] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def feedctl_script() -> Path:
    script = Path(sys.executable).parent / "feedctl"
    return script if script.exists() else Path(shutil.which("feedctl"))


def checks_of(result) -> dict[str, dict]:
    return {e["check"]: e for e in json_lines(result.stdout) if e.get("event") == "check"}
