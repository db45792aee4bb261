"""`feedctl compile`: the demo and init projects, its JSON output, feeds without a sink; it starts no JVM,
imports no Spark and opens no connection. Selectors and --vars: test_cli_selectors.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import Cli, json_lines
from support.cli import DEMO_FEEDS, TRACEBACK, assert_clean, checks_of, diagnostics, feedctl_script, manifest


def test_compile_demo(demo_project):
    result = Cli(demo_project)("compile")
    assert result.exit_code == 0, result.output
    assert_clean(result)
    m = manifest(demo_project)
    assert set(m["feeds"]) == DEMO_FEEDS
    assert m["metadata"]["selectors"] == []
    assert {p.name for p in (demo_project / "target" / "compiled").glob("*.sql")} == {
        "vehicles_in_use.sql",
        "ride_ends.sql",
    }


def test_compile_demo_warns_about_missing_tables(demo_project):
    """The demo's tables are created by `workload init`: before that, compile succeeds with FC521 warnings."""
    result = Cli(demo_project)("compile", json_logs=True)
    assert result.exit_code == 0, result.output
    found = diagnostics(result)
    assert {d["code"] for d in found} == {"FC521"}
    assert {d["severity"] for d in found} == {"warning"}
    assert all(d["file"] == "project.yml" and d["line"] > 0 and d["column"] > 0 for d in found)


def test_warn_error_fails_a_compile_that_only_warns(demo_project):
    result = Cli(demo_project)("compile", "--warn-error")
    assert result.exit_code == 1
    assert "error FC521" in result.output and "warning FC521" not in result.output


def test_github_annotations_point_at_the_file_in_the_repository(demo_project, tmp_path):
    """`--log-format github`: one workflow command per diagnostic, its file relative to the repository's root
    (GITHUB_WORKSPACE), so the pull request shows it on the line."""
    workspace = demo_project.parent
    (demo_project / "feeds" / "broken.yml").write_text(
        "feeds:\n  - name: broken\n    tables: [movr.vehicles]\n    sink: nowhere\n"
    )
    result = Cli(demo_project)("--log-format", "github", "compile", env={"GITHUB_WORKSPACE": str(workspace)})
    assert result.exit_code == 1
    lines = result.output.splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert errors and all("%0A" not in line.split("::")[1] for line in errors), errors
    [sink] = [line for line in errors if "nowhere" in line]
    where = f"{demo_project.name}/feeds/broken.yml"
    assert sink.startswith(f"::error file={where},line=4,col=11,title=FC"), sink
    warnings = [line for line in lines if line.startswith("::warning ")]
    assert warnings and all(f"file={demo_project.name}/project.yml,line=" in w for w in warnings)


def test_compile_json_output(init_project):
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    [done] = [e for e in events if e["event"] == "compiled"]
    assert done["feeds"] == 2 and done["warnings"] == 0
    assert Path(done["manifest"]) == init_project / "target" / "manifest.json"


def test_sinkless_and_null_feeds(init_project):
    feeds = init_project / "feeds" / "orders.yml"
    feeds.write_text(
        feeds.read_text()
        + (
            "  - name: no_sink\n    tables: [shop.orders]\n"
            "  - name: to_null\n    tables: [shop.orders]\n    sink: nothing\n"
        ),
        encoding="utf-8",
    )
    sinks = init_project / "sinks" / "local.yml"
    sinks.write_text(sinks.read_text() + '  - name: nothing\n    uri: "null://"\n', encoding="utf-8")
    result = Cli(init_project)("compile")
    assert result.exit_code == 0, result.output
    m = manifest(init_project)
    assert m["feeds"]["no_sink"]["sink"] is None
    assert m["sinks"]["nothing"]["kind"] == "null"
    records = {r["name"]: r for r in json_lines(Cli(init_project)("ls", json_logs=True).stdout)}
    assert records["no_sink"]["sink"] is None and records["no_sink"]["sink_uri"] is None
    assert records["to_null"]["sink"] == "nothing"
    text = Cli(init_project)("ls")
    assert text.exit_code == 0 and "no_sink" in text.stdout
    checks = checks_of(Cli(init_project)("debug", json_logs=True))
    assert checks["sink nothing"]["ok"]


# --- the installed command; no JVM, no network ---------------------------------------------------------


def test_compile_needs_no_java(init_project, tmp_path):
    """compile never starts a JVM: no JAVA_HOME, and a `java` on PATH that records being called."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    marker = tmp_path / "java-was-called"
    java = fake_bin / "java"
    java.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    java.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(JAVA_HOME=str(tmp_path / "no-such-jdk"), PATH=str(fake_bin))
    for args in (["compile"], ["ls"], ["--log-format", "json", "compile", "-s", "tag:none"]):
        proc = subprocess.run(
            [str(feedctl_script()), "--project-dir", str(init_project), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == (1 if "tag:none" in args else 0), proc.stderr
        assert TRACEBACK not in proc.stderr
    assert (init_project / "target" / "manifest.json").is_file()
    assert not marker.exists()


_NO_SPARK_PROBE = r"""
import json, socket, subprocess, sys

calls = []
def refuse(name):
    def fail(*args, **kwargs):
        calls.append(name)
        raise OSError(f"{name} is not allowed during compile")
    return fail

socket.socket.connect = refuse("socket.connect")
socket.socket.connect_ex = refuse("socket.connect_ex")
socket.create_connection = refuse("socket.create_connection")
socket.getaddrinfo = refuse("socket.getaddrinfo")
subprocess.Popen.__init__ = refuse("subprocess.Popen")

from feedctl.compiler.compile import compile_project
from feedctl.compiler.manifest import write_target
from feedctl.cli import main

result = compile_project(sys.argv[1])
write_target(result)
try:
    main(["--project-dir", sys.argv[1], "compile"], standalone_mode=False)
    main(["--project-dir", sys.argv[1], "ls"], standalone_mode=False)
except SystemExit as exc:
    assert not exc.code, exc.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "delta"))
print(json.dumps({"feeds": sorted(result.feeds), "loaded": loaded, "calls": calls}))
"""


@pytest.mark.parametrize("project", ["init", "demo"])
def test_compile_imports_no_spark_and_opens_no_connection(init_project, demo_project, project):
    root = init_project if project == "init" else demo_project
    proc = subprocess.run(
        [sys.executable, "-c", _NO_SPARK_PROBE, str(root)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["feeds"]
    assert report["loaded"] == [], "compile imported Spark"
    assert report["calls"] == [], "compile opened a connection or started a process"
