"""Mutated projects and flags (`feedctl.testing.fuzz`): every answer is exit 0, or 1 or 2 with diagnostics
inside the files they name, never an internal error, never the planted secret in the output or in target/.
A few examples here; `make fuzz` runs it for minutes."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from feedctl.cli import main
from feedctl.testing.fuzz import SECRET, SECRET_NAME, Answer, Mutant, arguments, judge, mutants, write

EXAMPLES = int(os.environ.get("FEEDCTL_FUZZ_EXAMPLES", "60"))


@pytest.fixture(scope="module", autouse=True)
def planted_secret():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_NAME, SECRET)
        yield


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutants())
def test_every_mutant_gets_a_clean_answer(tmp_path_factory, mutant: Mutant):
    root = write(tmp_path_factory.mktemp("fuzz") / "p", mutant.files)
    result = CliRunner().invoke(main, arguments(root, mutant.command))
    answer = Answer(result.exit_code, result.stdout + result.stderr, result.exception)
    assert judge(root, answer) == [], f"{mutant.what}; feedctl {' '.join(mutant.command)}"
