"""The command as a whole: no project, bad usage (exit code 2), --version and --help, unexpected errors
(short without --debug, a traceback with it), and the installed console script."""

from __future__ import annotations

import subprocess
import sys

import pytest

import feedctl
from support import Cli, json_lines
from support.cli import TRACEBACK, assert_clean, checks_of, diagnostics, feedctl_script


@pytest.mark.parametrize("command", ["compile", "ls", "debug"])
@pytest.mark.parametrize("where", ["empty", "missing"])
def test_no_project(tmp_path, command, where):
    project_dir = tmp_path / where
    if where == "empty":
        project_dir.mkdir()
    result = Cli(project_dir)(command, json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    if command == "debug":
        checks = checks_of(result)
        assert checks["project"]["ok"] is False and "FC001" in checks["project"]["detail"]
    else:
        assert [d["code"] for d in diagnostics(result)] == ["FC001"]
        text = Cli(project_dir)(command)
        assert text.exit_code == 1 and "FC001" in text.stderr
        assert_clean(text)
    assert not project_dir.exists() or not (project_dir / "target").exists()


def test_no_project_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FEEDCTL_PROJECT_DIR", raising=False)
    result = Cli()("compile", json_logs=True)
    assert result.exit_code == 1
    assert [d["code"] for d in diagnostics(result)] == ["FC001"]


def test_project_dir_from_the_environment(init_project, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEEDCTL_PROJECT_DIR", str(init_project))
    assert Cli()("compile").exit_code == 0
    assert (init_project / "target" / "manifest.json").is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["bogus"],
        ["--bogus", "compile"],
        ["compile", "--bogus"],
        ["ls", "extra-argument"],
        ["compile", "-s"],
        ["--log-format", "xml", "compile"],
        ["init"],
        ["debug", "--vars", "{a: 1}"],
    ],
)
def test_bad_usage_exits_2(demo_project, argv):
    result = Cli(demo_project)(*argv)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip()
    assert_clean(result)


def test_a_cursor_in_the_future_is_a_usage_error(demo_project):
    result = Cli(demo_project)("run", "--new-job", "--cursor", "2130-01-01T00:00:00Z")
    assert result.exit_code == 2 and "is in the future" in result.stderr, result.output
    assert not (demo_project / "target/state.db").exists(), "nothing was started"


def test_project_dir_that_is_a_file(tmp_path):
    path = tmp_path / "project.yml"
    path.write_text("name: x\n")
    result = Cli(path)("compile")
    assert result.exit_code == 2
    assert_clean(result)


def test_version():
    result = Cli()("--version")
    assert result.exit_code == 0
    assert feedctl.__version__ in result.stdout


def test_help():
    result = Cli()("--help")
    assert result.exit_code == 0
    for command in ("init", "compile", "ls", "debug"):
        assert command in result.stdout


# --- unexpected errors ---------------------------------------------------------------------------------


def _internal_error(*_args, **_kwargs):
    raise RuntimeError("an error feedctl does not expect")


# A program that runs the CLI with compile failing as an internal error does: what --debug shows of it.
FAILING_COMPILE = (
    "import sys, feedctl.commands.compile as c; from feedctl.cli import main; "
    "c.compile_target = lambda *a, **k: (_ for _ in ()).throw(RuntimeError('unexpected')); "
    "sys.argv = ['feedctl', *sys.argv[1:]]; main()"
)


def test_internal_error_without_debug_is_short(demo_project, monkeypatch):
    monkeypatch.setattr("feedctl.commands.compile.compile_target", _internal_error)
    result = Cli(demo_project)("compile")
    assert result.exit_code == 1
    assert_clean(result)
    assert "RuntimeError: an error feedctl does not expect (run with --debug" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 10

    as_json = Cli(demo_project)("compile", json_logs=True)
    assert as_json.exit_code == 1
    assert "error" in [e.get("event") for e in json_lines(as_json.stderr)]


def test_internal_error_with_debug_propagates(demo_project, monkeypatch):
    monkeypatch.setattr("feedctl.commands.compile.compile_target", _internal_error)
    with pytest.raises(RuntimeError):
        Cli(demo_project)("--debug", "compile")


def test_internal_error_with_debug_prints_a_traceback(demo_project):
    proc = subprocess.run(
        [sys.executable, "-c", FAILING_COMPILE, "--project-dir", str(demo_project), "--debug", "compile"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert TRACEBACK in proc.stderr and "RuntimeError: unexpected" in proc.stderr


def test_a_file_where_target_belongs_is_said_with_its_path(demo_project):
    (demo_project / "target").write_text("a file where the target folder should be")
    result = Cli(demo_project)("compile")
    assert result.exit_code == 1 and "target is not a folder" in result.stderr
    (demo_project / "target").unlink()
    (demo_project / "target/manifest.json").mkdir(parents=True)
    result = Cli(demo_project)("compile")
    assert result.exit_code == 1 and "manifest.json" in result.stderr and "--debug" not in result.stderr


# --- the installed command; no JVM, no network ---------------------------------------------------------


def test_console_script(init_project):
    proc = subprocess.run(
        [str(feedctl_script()), "--project-dir", str(init_project), "compile"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (init_project / "target" / "manifest.json").is_file()

    proc = subprocess.run(
        [str(feedctl_script()), "--project-dir", str(init_project), "compile", "-s", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "FC601" in proc.stderr and TRACEBACK not in proc.stderr

    proc = subprocess.run([str(feedctl_script()), "frobnicate"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2


def test_job_control_names_a_feed_that_does_not_exist(init_project):
    result = Cli(init_project)("pause", "ordres")
    assert result.exit_code == 2 and 'no feed named "ordres"; did you mean "orders"?' in result.output
    for command in (["status", "ordres"], ["verify", "ordres"], ["tail", "ordres"]):
        result = Cli(init_project)(*command)
        assert result.exit_code in (1, 2) and 'did you mean "orders"?' in result.output, (command, result.output)
    result = Cli(init_project)("pause", "orders")  # a feed of the project, before `run` created its job
    assert result.exit_code == 2 and 'no job for feed "orders" (feedctl run creates it)' in result.output


def test_a_state_store_out_of_reach_is_said_in_its_own_words(demo_project):
    project = demo_project / "project.yml"
    project.write_text(
        project.read_text().replace(
            "state: sqlite:///target/state.db", "state: postgresql+psycopg://cdc:wrong@127.0.0.1:1/feeds"
        )
    )
    result = Cli(demo_project)("jobs")
    assert result.exit_code == 1
    assert "the state store failed: connection failed" in result.stderr, result.output
    assert "sqlalche.me" not in result.output and "--debug" not in result.output
