"""`feedctl compile`: validate the project and write `target/manifest.json` and `target/compiled/`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from feedctl.compiler.compile import CompileResult
from feedctl.compiler.manifest import write_target
from feedctl.compiler.state import compile_selected


@dataclass
class Compiled:
    result: CompileResult
    manifest: Path
    seconds: float


def compile_target(
    project_dir, selectors: list[str], vars_override: dict | None, state_dir: str | None = None
) -> Compiled:
    started = time.perf_counter()
    result = compile_selected(project_dir, selectors, state_dir, vars_override=vars_override, keep=True)
    path = write_target(result, selectors)
    return Compiled(result, path, time.perf_counter() - started)
