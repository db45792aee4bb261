"""The `feedctl-compile` hook of .pre-commit-hooks.yaml, run by the real pre-commit in a temporary Git
repository holding a small project: a clean project commits; a slip in a feed's YAML stops the commit with
the compiler's error, file and line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import write_delta
from support.e2e import file_sink, write_feeds, write_project

REPOSITORY = Path(__file__).resolve().parents[3]


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)


def _hooks_repository(tmp_path: Path) -> str:
    """A repository offering this checkout's hooks file, as pre-commit clones it: (path, commit)."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    shutil.copy(REPOSITORY / ".pre-commit-hooks.yaml", hooks)
    _git(hooks, "init", "-q")
    _git(hooks, "add", ".")
    _git(hooks, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "hooks")
    return _git(hooks, "rev-parse", "HEAD").stdout.strip()


def test_the_compile_hook_stops_a_commit_with_an_invalid_feed(tmp_path):
    rev = _hooks_repository(tmp_path)
    feed = {"name": "orders", "tables": ["s.orders"], "sink": "files"}
    root = write_project(
        tmp_path / "project",
        {"orders": {"path": "warehouse/orders", "primary_key": ["id"]}},
        [feed],
        [file_sink("files")],
    )
    write_delta(root / "warehouse/orders", {"id": "int64"}, [{"id": 1}])
    (root / ".gitignore").write_text("target/\n")
    (root / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {tmp_path / 'hooks'}\n    rev: {rev}\n    hooks:\n      - id: feedctl-compile\n"
    )
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    pre_commit = [sys.executable, "-m", "pre_commit"]
    _git(root, "init", "-q")
    subprocess.run([*pre_commit, "install"], cwd=root, env=env, check=True, capture_output=True)
    _git(root, "add", ".")
    done = subprocess.run(["git", "commit", "-qm", "a feed"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "feedctl compile" in done.stdout + done.stderr and "Passed" in done.stdout + done.stderr

    write_feeds(root, [{**feed, "options": {"diff": "yes please"}}])
    _git(root, "add", ".")
    refused = subprocess.run(["git", "commit", "-qm", "a slip"], cwd=root, env=env, capture_output=True, text=True)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Failed" in output
    assert "feeds/feeds.yml:7:11: error FC103" in output and "options.diff" in output, output
    assert _git(root, "log", "--format=%s").stdout.split() == ["a", "feed"]  # nothing committed

    # files the hook does not concern do not run it
    _git(root, "reset", "-q")
    write_feeds(root, [feed])
    (root / "README.md").write_text("notes\n")
    _git(root, "add", "README.md")
    done = subprocess.run([*pre_commit, "run"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "(no files to check)Skipped" in done.stdout, done.stdout
