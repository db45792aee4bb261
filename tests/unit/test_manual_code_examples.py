"""The manual's example of each diagnostic code (`feedctl.manual.code_examples`) triggers that code: each is laid
over the base project in a temporary folder and its command run in-process, as a user would type it."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedctl.diagnostics import CODES
from feedctl.manual.code_examples import BASE, EXAMPLES, CodeExample
from support import Cli, write_files
from support.cli import assert_clean, diagnostics

# Codes an example reports besides its own, where no smaller example avoids them; any other code fails.
ALSO: dict[str, set[str]] = {}  # codes an example may report beside its own


def project_of(example: CodeExample, root: Path) -> Path:
    write_files(root, {**BASE, **example.files})
    for relative in example.removes:
        (root / relative).unlink()
    return root


def run(example: CodeExample, root: Path, *extra: str):
    result = Cli(root)(*example.command, *extra, json_logs=True, env=dict(example.env))
    assert_clean(result)
    return result, diagnostics(result)


def test_every_code_has_an_example():
    assert set(EXAMPLES) == set(CODES)
    assert list(EXAMPLES) == sorted(EXAMPLES)


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_example_is_well_formed(code):
    example = EXAMPLES[code]
    assert all(not Path(p).is_absolute() and ".." not in Path(p).parts for p in example.files), example.files
    assert set(example.removes) <= set(BASE), example.removes
    assert example.command and example.command[0] in ("compile", "ls", "test", "run", "plan")
    if example.note:
        assert not example.files and not example.removes, "an example with a note shows no files"
    else:
        assert example.files or example.removes or example.command != ("compile",), "an example changes something"


def test_base_compiles_clean(tmp_path):
    root = project_of(CodeExample(), tmp_path / "shop")
    result, found = run(CodeExample(), root)
    assert result.exit_code == 0, result.stderr
    assert found == []
    assert (root / "target" / "manifest.json").is_file()


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_example_reports_its_code(code, tmp_path):
    example = EXAMPLES[code]
    if example.note:
        pytest.skip(f"{code} has no runnable example: {example.note}")
    root = project_of(example, tmp_path / "shop")
    result, found = run(example, root)
    own = [d for d in found if d["code"] == code]
    assert own, f"{code} not reported:\n{result.stderr}"
    assert {d["code"] for d in found} - {code} <= ALSO.get(code, set()), result.stderr
    if any(d["severity"] == "error" for d in own):
        assert result.exit_code == 1, result.stderr
    else:  # a warning: the command succeeds, unless warnings are errors
        assert result.exit_code == 0, result.stderr
        if example.command[0] == "compile":
            strict, _ = run(example, project_of(example, tmp_path / "strict"), "--warn-error")
            assert strict.exit_code == 1, strict.stderr
