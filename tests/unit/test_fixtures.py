"""The schema tested as data: every folder under fixtures/valid compiles, every folder under fixtures/invalid
fails with exactly the errors its expected.yml lists (code, file, line).

A case folder is a complete project, plus two files feedctl never reads:
- `expected.yml`: `errors:` (the exact set) and `warnings:` (must be among those reported), each a list of
  `{code, file, line}`; `file` is relative to the project.
- `tables.yml`: Delta tables to create before compiling, `{tables: [{path, columns: {name: type},
  change_data_feed: true}]}`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from support import FIXTURES, Cli, json_lines, write_delta

NOT_PROJECT_FILES = ("expected.yml", "tables.yml")
VALID = sorted(p.name for p in (FIXTURES / "valid").iterdir() if p.is_dir())
INVALID = sorted(p.name for p in (FIXTURES / "invalid").iterdir() if p.is_dir())
DIAGNOSTIC_FIELDS = {
    "code": str,
    "name": str,
    "severity": str,
    "file": str,
    "line": int,
    "column": int,
    "message": str,
    "json_path": str,
    "expected": str,
    "hint": str,
    "related": list,
}


@pytest.fixture(autouse=True)
def _no_fixture_env_vars(monkeypatch):
    """Fixtures use FEEDCTL_FIXTURE_* variables that must be unset (to test defaults and unset errors)."""
    for name in list(os.environ):
        if name.startswith("FEEDCTL_FIXTURE_"):
            monkeypatch.delenv(name)


def prepare(case_dir: Path, dest: Path) -> Path:
    """Copy a case's project files into `dest` and create the Delta tables it declares."""
    shutil.copytree(case_dir, dest, ignore=shutil.ignore_patterns(*NOT_PROJECT_FILES))
    tables = case_dir / "tables.yml"
    if tables.is_file():
        for table in yaml.safe_load(tables.read_text())["tables"]:
            write_delta(dest / table["path"], table["columns"], change_data_feed=table.get("change_data_feed", True))
    return dest


def expected_of(case_dir: Path) -> dict:
    path = case_dir / "expected.yml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def triples(entries) -> set[tuple[str, str, int]]:
    return {(e["code"], e["file"], e["line"]) for e in entries or []}


def project_relative(file: str, project: Path) -> str:
    """Diagnostics name files relative to the project; FC001 (no project.yml) names the absolute path."""
    path = Path(file)
    if path.is_absolute():
        return path.resolve().relative_to(project.resolve()).as_posix()
    return file


def compile_case(case_dir: Path, tmp_path: Path):
    project = prepare(case_dir, tmp_path / case_dir.name)
    result = Cli(project)("compile", json_logs=True)
    diagnostics = [e for e in json_lines(result.stderr) if e.get("event") == "diagnostic"]
    for d in diagnostics:
        d["file"] = project_relative(d["file"], project)
    return project, result, diagnostics


def assert_well_formed(result, diagnostics) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert not [e for e in json_lines(result.stderr) if e.get("event") == "error"], result.stderr
    for d in diagnostics:
        for name, kind in DIAGNOSTIC_FIELDS.items():
            assert isinstance(d.get(name), kind), f"{name} missing or not {kind.__name__} in {d}"
        assert d["severity"] in ("error", "warning")
        assert d["json_path"] == "" or d["json_path"].startswith("$"), d
        assert d["line"] >= 0 and d["column"] >= 0, d
        if d["line"]:
            assert d["column"] >= 1, d


@pytest.mark.parametrize("case", VALID)
def test_valid_project_compiles(case, tmp_path):
    case_dir = FIXTURES / "valid" / case
    project, result, diagnostics = compile_case(case_dir, tmp_path)
    assert_well_formed(result, diagnostics)
    assert result.exit_code == 0, result.stderr
    assert not [d for d in diagnostics if d["severity"] == "error"]
    assert (project / "target" / "manifest.json").is_file()
    missing = triples(expected_of(case_dir).get("warnings")) - triples(diagnostics)
    assert not missing, f"warnings not reported: {sorted(missing)}\n{result.stderr}"


@pytest.mark.parametrize("case", INVALID)
def test_invalid_project_reports_exactly_its_errors(case, tmp_path):
    case_dir = FIXTURES / "invalid" / case
    expected = expected_of(case_dir)
    project, result, diagnostics = compile_case(case_dir, tmp_path)
    assert_well_formed(result, diagnostics)
    assert result.exit_code == 1, result.output
    assert not (project / "target" / "manifest.json").exists()
    errors = [d for d in diagnostics if d["severity"] == "error"]
    assert triples(errors) == triples(expected["errors"]), result.stderr
    missing = triples(expected.get("warnings")) - triples(diagnostics)
    assert not missing, f"warnings not reported: {sorted(missing)}\n{result.stderr}"
    positions = [(d["file"], d["line"], d["column"]) for d in diagnostics]
    assert positions == sorted(positions), "diagnostics are not sorted by file and position"


def test_corpus_is_large_enough():
    assert len(INVALID) >= 40
    assert len(VALID) >= 6
    for case in INVALID:
        expected = expected_of(FIXTURES / "invalid" / case)
        assert expected.get("errors"), f"{case}/expected.yml lists no errors"


@pytest.mark.parametrize("kind", ["valid", "invalid"])
def test_expected_locations_are_real_lines(kind):
    """Each expected location names a file of its case and a non-blank line of it (line 0: no position)."""
    for case in VALID if kind == "valid" else INVALID:
        expected = expected_of(FIXTURES / kind / case)
        for code, file, line in triples(expected.get("errors")) | triples(expected.get("warnings")):
            if line == 0:
                continue
            lines = (FIXTURES / kind / case / file).read_bytes().split(b"\n")
            blank_file_ok = code == "FC005"  # an empty file is reported at its line 1
            assert 0 < line <= len(lines) and (lines[line - 1].strip() or blank_file_ok), f"{case}: {file}:{line}"


def test_corpus_covers_the_project_codes():
    from feedctl.diagnostics import CODES

    covered = set()
    for case in INVALID:
        covered |= {c for c, _, _ in triples(expected_of(FIXTURES / "invalid" / case)["errors"])}
    for case in VALID:
        covered |= {c for c, _, _ in triples(expected_of(FIXTURES / "valid" / case).get("warnings"))}
    project_codes = {c for c in CODES if "FC001" <= c <= "FC407"}
    assert project_codes - covered == set()
    assert {"FC501", "FC502", "FC503", "FC505", "FC509", "FC516", "FC518", "FC519"} <= covered


def _diagnostic(case: str, code: str, tmp_path: Path) -> dict:
    _, _, diagnostics = compile_case(FIXTURES / "invalid" / case, tmp_path)
    return next(d for d in diagnostics if d["code"] == code)


def test_a_yaml_1_1_boolean_says_what_to_write(tmp_path):
    d = _diagnostic("boolean_written_yes", "FC103", tmp_path)
    assert d["hint"] == 'write true (in YAML 1.2, "yes" is text)'


def test_a_duration_without_its_unit_suggests_one(tmp_path):
    _, _, diagnostics = compile_case(FIXTURES / "invalid" / "duration_without_unit", tmp_path)
    assert [d["hint"] for d in diagnostics] == [
        'did you mean "10s"? a duration has a unit',
        'did you mean "5s"? a duration has a unit',
    ]


def test_a_misspelled_env_var_suggests_it(tmp_path):
    d = _diagnostic("env_var_misspelled", "FC401", tmp_path)
    assert d["hint"] == 'did you mean "env_var"?' and "'envvar' is undefined" in d["message"]


def test_a_misindented_key_says_which_lines_differ(tmp_path):
    d = _diagnostic("yaml_key_misindented", "FC003", tmp_path)
    assert d["hint"] == (
        "check the indentation: line 4 is indented 3 spaces, line 3 above it 4; the keys of one "
        "mapping start in the same column"
    )


def test_misspelled_key_suggests_the_key(tmp_path):
    d = _diagnostic("misspelled_option_key", "FC101", tmp_path)
    assert d["hint"] == 'did you mean "envelope"?'
    assert d["json_path"] == "$.feeds[0].options.envelop"
    assert "envelope" in d["expected"]


def test_misspelled_enum_value_suggests_the_value(tmp_path):
    d = _diagnostic("bad_enum_envelope", "FC104", tmp_path)
    assert d["hint"] == 'did you mean "wrapped"?'
    assert d["json_path"] == "$.feeds[0].options.envelope"


def test_unknown_names_suggest_the_nearest(tmp_path):
    assert _diagnostic("unknown_sink_typo", "FC202", tmp_path / "a")["hint"] == 'did you mean "files"?'
    assert _diagnostic("unknown_sink_scheme", "FC207", tmp_path / "b")["hint"] == 'did you mean "kafka"?'
    assert _diagnostic("sql_unknown_column", "FC518", tmp_path / "c")["hint"].startswith('did you mean "total"?')


def test_initial_scan_yes_stays_a_string(tmp_path):
    project, result, _ = compile_case(FIXTURES / "valid" / "initial_scan_yes_unquoted", tmp_path)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((project / "target" / "manifest.json").read_text())
    assert manifest["feeds"]["orders"]["options"]["initial_scan"] == "yes"


def test_env_var_defaults_are_used_and_secrets_redacted(tmp_path):
    project, result, _ = compile_case(FIXTURES / "valid" / "every_sink_kind", tmp_path)
    assert result.exit_code == 0, result.stderr
    text = (project / "target" / "manifest.json").read_text()
    assert "dev-token" not in text
    manifest = json.loads(text)
    assert manifest["sinks"]["webhook"]["kind"] == "webhook"
    assert {s["kind"] for s in manifest["sinks"].values()} == {"cloudstorage", "kafka", "webhook", "null"}
