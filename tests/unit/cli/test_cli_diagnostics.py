"""Diagnostics of a broken project, as JSON and as text: code, file, line and column of each error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support import Cli
from support.cli import assert_clean, diagnostics, set_line


@pytest.fixture
def broken_project(init_project) -> Path:
    """An init project with an unknown sink on line 6, column 11 of feeds/orders.yml."""
    set_line(init_project / "feeds" / "orders.yml", "    sink: local_files", "    sink: local_filez")
    return init_project


def test_json_diagnostics(broken_project):
    result = Cli(broken_project)("compile", json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    objects = [json.loads(line) for line in lines]  # every stderr line is a JSON object
    for d in objects:
        assert {"code", "file", "line", "column", "severity", "message"} <= set(d)
    errors = [d for d in objects if d["severity"] == "error"]
    assert errors and all(d["code"] == "FC202" for d in errors)
    first = min(errors, key=lambda d: d["line"])
    assert (first["file"], first["line"], first["column"]) == ("feeds/orders.yml", 6, 11)
    assert "local_files" in first["hint"]
    assert result.stdout == ""
    assert not (broken_project / "target" / "manifest.json").exists()


def test_text_diagnostics(broken_project):
    result = Cli(broken_project)("compile")
    assert result.exit_code == 1
    assert_clean(result)
    assert re.search(r"^feeds/orders\.yml:6:11: error FC202\b", result.stderr, re.M), result.stderr


def test_sql_error_points_into_the_query_file(init_project):
    query = init_project / "feeds" / "large_orders.sql"
    query.write_text(query.read_text().replace("amount >=", "amout >="), encoding="utf-8")
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 1
    [error] = [d for d in diagnostics(result) if d["severity"] == "error"]
    assert (error["code"], error["file"], error["line"], error["column"]) == ("FC518", "feeds/large_orders.sql", 3, 7)
    text = Cli(init_project)("compile")
    assert re.search(r"^feeds/large_orders\.sql:3:7: error FC518\b", text.stderr, re.M), text.stderr


def test_yaml_syntax_error(init_project):
    (init_project / "feeds" / "bad.yml").write_text("feeds:\n  - name: x\n    tables: [shop.orders\n")
    for command in ("compile", "ls"):
        result = Cli(init_project)(command, json_logs=True)
        assert result.exit_code == 1
        assert_clean(result)
        [error] = [d for d in diagnostics(result) if d["severity"] == "error"]
        assert error["code"] == "FC003" and error["file"] == "feeds/bad.yml" and error["line"] >= 3


def test_several_errors_in_several_files_are_all_reported(init_project):
    set_line(init_project / "feeds" / "orders.yml", "    sink: local_files", "    sink: nowhere")
    set_line(init_project / "sinks" / "local.yml", "      partition_format:", "      partition_format: weekly")
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 1
    found = {(d["code"], d["file"], d["line"]) for d in diagnostics(result) if d["severity"] == "error"}
    assert ("FC202", "feeds/orders.yml", 6) in found
    assert ("FC104", "sinks/local.yml", 7) in found
