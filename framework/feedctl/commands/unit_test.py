"""`feedctl test [-s SEL]`: the project's unit tests (`tests/*.yml`, `unit_tests/spec.py`), each run through
`feedctl run`'s own code (`unit_tests/harness.py`), all on one Spark session."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from feedctl.compiler.state import compile_selected
from feedctl.diagnostics import Diagnostic, ProjectError, first_line
from feedctl.project.loader import load_project
from feedctl.unit_tests import harness, spec
from feedctl.unit_tests.compare import differences


@dataclass
class Outcome:
    test: spec.UnitTest
    status: str  # passed | failed | error
    lines: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def where(self) -> str:
        return f"{self.test.file}::{self.test.name}"


def run_tests(
    project_dir, selectors: list[str] | None = None, state_dir: str | None = None, told=lambda outcome: None
) -> list[Outcome]:
    """Every unit test of the feeds `selectors` select (`state:modified` against `state_dir` too); `told(outcome)`
    as each one ends."""
    project = load_project(project_dir)[0]
    tests, problems = spec.load(project.root)
    chosen = set(project.feeds)
    if selectors:
        chosen = set(compile_selected(project_dir, selectors, state_dir, check_tables=False).feeds)
    for test in tests:
        if test.feed not in project.feeds:
            problems.append(Diagnostic(test.file, test.line, 1, "FC702", f"unit test {test.name}: no feed {test.feed}"))
    if any(d.is_error for d in problems):
        raise ProjectError(problems)
    outcomes = []
    schemas: dict[str, pa.Schema] = {}
    with tempfile.TemporaryDirectory(prefix="feedctl-test-") as tmp:
        for i, test in enumerate(t for t in tests if t.feed in chosen):
            started = time.perf_counter()
            try:
                for given in test.given:
                    if given.table not in schemas and given.table in project.tables:
                        schemas[given.table] = _schema(project, given.table)
                got = harness.run_test(test, project, project.feeds[test.feed], schemas, Path(tmp) / str(i), _run)
            except (harness.RunFailed, ValueError, OSError) as exc:
                outcome = Outcome(test, "error", [first_line(exc, 400)])
            else:
                lines = differences(test.expect, got)
                outcome = Outcome(test, "failed" if lines else "passed", lines)
            outcome.seconds = time.perf_counter() - started
            told(outcome)
            outcomes.append(outcome)
    return outcomes


def _run(root: Path, feed: str) -> list:
    """`feedctl run` of the test's copy of the project, once: a failed batch is not retried."""
    from feedctl.commands.run import run_feeds
    from feedctl.node.settings import RunSettings

    return run_feeds(root, [feed], RunSettings(retries=0, retry_backoff=0.01))


def _schema(project, table: str) -> pa.Schema:
    """The table's schema as feedctl reads it: from the table, or where it cannot be opened, from schemas.yml
    (its Delta types, converted by delta-rs as for a table)."""
    from deltalake import Schema

    from feedctl.compiler import frozen_schemas
    from feedctl.source.arrow_types import spark_schema
    from feedctl.source.delta import of_table

    try:
        return of_table(table, project.tables[table]).schema()
    except Exception as exc:  # out of reach (CI): its frozen schema, if any
        frozen = frozen_schemas.load(project)[0].get(table)
        if frozen is None:
            raise ValueError(f"table {table} cannot be opened ({first_line(exc)}) and schemas.yml lacks it") from None
        fields = [{"name": c, "type": frozen.types.get(c), "nullable": True, "metadata": {}} for c in frozen.columns]
        delta = Schema.from_json(json.dumps({"type": "struct", "fields": fields}))
        return spark_schema(pa.schema(delta.to_arrow()))
