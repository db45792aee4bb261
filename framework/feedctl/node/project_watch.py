"""A --follow node's project, watched: when its files change, the project is compiled again and each feed's
runner takes its new definition, as a node restarted with it would (`JobRunner.take`)."""

from __future__ import annotations

import time
from pathlib import Path

from feedctl.compiler.compile import CompileResult, compile_project
from feedctl.diagnostics import ProjectError
from feedctl.project.fingerprint import fingerprint
from feedctl.units import plural


class ProjectWatch:
    def __init__(self, root: Path, selectors: list[str] | None, vars_override: dict | None, log, every: float = 2.0):
        self.root, self.selectors, self.vars_override, self.log, self.every = root, selectors, vars_override, log, every
        self.seen = fingerprint(root)
        self.next = time.monotonic() + every

    def poll(self) -> CompileResult | None:
        """The project compiled again when its files changed since the last poll, at most every `every`
        seconds; None when they did not, or when it no longer compiles (the node runs on as it was)."""
        if time.monotonic() < self.next:
            return None
        self.next = time.monotonic() + self.every
        now = fingerprint(self.root)
        if now == self.seen:
            return None
        self.seen = now
        try:
            result = compile_project(self.root, self.selectors, self.vars_override, lenient_columns=True)
        except ProjectError as exc:
            errors = [d for d in exc.diagnostics if d.is_error]
            self.log(
                f"the project changed and does not compile ({plural(len(errors), 'error')}; first: "
                f"{errors[0].format().splitlines()[0] if errors else exc}); its feeds run on as they were",
                event="project_invalid",
                errors=len(errors),
            )
            return None
        self.log("the project changed: compiled again", event="project_changed")
        return result
