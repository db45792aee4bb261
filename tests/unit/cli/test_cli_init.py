"""`feedctl init`: a project that compiles at once, in any folder, never over a user's files."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import feedctl
from support import Cli
from support.cli import assert_clean, manifest


def test_init_then_compile(tmp_path):
    root = tmp_path / "new_project"
    result = Cli()("init", str(root))
    assert result.exit_code == 0, result.output
    assert_clean(result)
    assert (root / "project.yml").is_file()

    result = Cli(root)("compile")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no warnings: the sample table exists and the query is clean
    target = root / "target"
    assert (target / "manifest.json").is_file()
    assert (target / "compiled" / "large_orders.sql").is_file()
    assert "FROM" in (target / "compiled" / "large_orders.sql").read_text()
    schemas = {p.name for p in (target / "schemas").glob("*.json")}
    assert schemas == {"defs.schema.json", "project.schema.json", "feeds.schema.json", "sinks.schema.json"}
    package = Path(feedctl.__file__).parent / "project" / "schemas"
    for name in schemas:
        assert (target / "schemas" / name).read_text() == (package / name).read_text()
    assert set(manifest(root)["feeds"]) == {"orders", "large_orders"}


def test_init_refuses_an_existing_project(init_project):
    project_yml = init_project / "project.yml"
    project_yml.write_text(project_yml.read_text() + "# my edit\n", encoding="utf-8")
    result = Cli()("init", str(init_project))
    assert result.exit_code == 2
    assert result.stderr.strip()
    assert_clean(result)
    assert project_yml.read_text().endswith("# my edit\n")  # nothing overwritten


def test_init_into_a_file_is_a_usage_error(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("x")
    result = Cli()("init", str(path))
    assert result.exit_code == 2
    assert_clean(result)


# --- init never overwrites -----------------------------------------------------------------------------


def test_init_never_overwrites_a_users_files(tmp_path):
    root = tmp_path / "existing"
    (root / "feeds").mkdir(parents=True)
    (root / "feeds" / "orders.yml").write_text("my own feeds\n")
    result = Cli()("init", str(root))
    assert result.exit_code == 2
    assert_clean(result)
    assert (root / "feeds" / "orders.yml").read_text() == "my own feeds\n"
    assert not (root / "project.yml").exists()  # refused before writing anything


def test_init_again_after_removing_project_yml(init_project):
    (init_project / "project.yml").unlink()
    result = Cli()("init", str(init_project))
    assert result.exit_code == 2
    assert_clean(result)


def test_init_keeps_an_existing_gitignore(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("*.pyc\n")
    assert Cli()("init", str(root)).exit_code == 0
    assert (root / ".gitignore").read_text() == "*.pyc\n"


@pytest.mark.parametrize("dirname", ["My Project-2", "2024 feeds", "___", "Ünïcode"])
def test_init_any_directory_name_compiles(tmp_path, dirname):
    root = tmp_path / dirname
    assert Cli()("init", str(root)).exit_code == 0
    result = Cli(root)("compile")
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"[a-z_][a-z0-9_]*", manifest(root)["project"]["name"])


def test_init_in_the_current_directory(tmp_path, monkeypatch):
    root = tmp_path / "here"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.delenv("FEEDCTL_PROJECT_DIR", raising=False)
    assert Cli()("init", ".").exit_code == 0
    assert Cli()("compile").exit_code == 0
    assert manifest(root)["project"]["name"] == "here"


def test_a_clone_of_a_new_project_has_its_sample_table(tmp_path):
    """The sample table lies outside target/ (which the scaffold's .gitignore excludes), so a clone compiles
    against it as the original does, and init says where it is."""
    root = tmp_path / "origin"
    result = Cli()("init", str(root))
    assert result.exit_code == 0, result.output
    assert "data/shop/orders" in result.output and "commit it" in result.output
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q", str(root)], check=True)
    subprocess.run(git + ["-C", str(root), "add", "-A"], check=True)
    subprocess.run(git + ["-C", str(root), "commit", "-q", "-m", "new project"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    assert (clone / "data/shop/orders/_delta_log").is_dir()
    assert not (clone / "target").exists()
    result = Cli(clone)("compile")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # the table opened: no FC521 "cannot read" warning


def test_a_name_with_a_line_break_is_refused_before_anything_is_written(tmp_path):
    root = tmp_path / "new\nline"
    result = Cli()("init", str(root))
    assert result.exit_code == 2 and "control character" in result.stderr
    assert not root.exists() and list(tmp_path.iterdir()) == []


def test_an_init_that_fails_halfway_leaves_nothing_of_its_own(tmp_path, monkeypatch):
    root = tmp_path / "half"
    (root / "notes").mkdir(parents=True)  # the user's, kept
    (root / "notes/todo.txt").write_text("mine")

    def full_disk(target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("feedctl.compiler.manifest.write_schemas", full_disk)
    result = Cli()("init", str(root))
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == ["notes", "notes/todo.txt"]
    monkeypatch.undo()
    assert Cli()("init", str(root)).exit_code == 0, "and init works there once the disk has room"
