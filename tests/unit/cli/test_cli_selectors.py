"""Selectors (`-s`) and `--vars` of `feedctl compile` and `feedctl ls`."""

from __future__ import annotations

import re

import pytest

from support import Cli, json_lines
from support.cli import DEMO_FEEDS, assert_clean, diagnostics, manifest


@pytest.mark.parametrize(
    "selectors, expected",
    [
        (["vehicles_in_use"], {"vehicles_in_use"}),
        (["tag:dispatch"], {"vehicles_in_use"}),
        (["tag:archive"], {"movr_all"}),
        (["tag:movr"], DEMO_FEEDS),
        (["table:movr.rides"], {"movr_all", "ride_ends"}),
        (["table:movr.vehicles"], {"movr_all", "vehicles_in_use"}),
        (["table:movr.users"], {"movr_all"}),
        (["sink:warehouse_files"], {"movr_all"}),
        (["sink:ride_events"], {"ride_ends"}),
        (["sink:dispatch"], {"vehicles_in_use"}),
        (["ride_ends", "sink:dispatch"], {"ride_ends", "vehicles_in_use"}),
    ],
)
def test_compile_selects(demo_project, selectors, expected):
    args = [a for s in selectors for a in ("-s", s)]
    result = Cli(demo_project)("compile", *args)
    assert result.exit_code == 0, result.output
    m = manifest(demo_project)
    assert set(m["feeds"]) == expected
    assert m["metadata"]["selectors"] == selectors

    listed = Cli(demo_project)("ls", *args, json_logs=True)
    assert listed.exit_code == 0, listed.output
    assert {r["name"] for r in json_lines(listed.stdout)} == expected


@pytest.mark.parametrize(
    "selector, code, suggestion",
    [
        ("movr_al", "FC601", "movr_all"),
        ("tag:movrr", "FC602", "movr"),
        ("table:movr.vehicle", "FC602", "movr.vehicles"),
        ("sink:dispatc", "FC602", "dispatch"),
    ],
)
@pytest.mark.parametrize("command", ["compile", "ls"])
def test_selector_matching_nothing(demo_project, command, selector, code, suggestion):
    result = Cli(demo_project)(command, "-s", selector, json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    errors = [d for d in diagnostics(result) if d["severity"] == "error"]
    assert [d["code"] for d in errors] == [code]
    assert f'"{suggestion}"' in errors[0]["hint"]
    assert not (demo_project / "target" / "manifest.json").exists()

    text = Cli(demo_project)(command, "-s", selector)
    assert text.exit_code == 1
    assert code in text.stderr and suggestion in text.stderr
    assert_clean(text)


def test_one_bad_selector_among_good_ones_fails(demo_project):
    result = Cli(demo_project)("compile", "-s", "ride_ends", "-s", "nope", json_logs=True)
    assert result.exit_code == 1
    assert [d["code"] for d in diagnostics(result) if d["severity"] == "error"] == ["FC601"]


@pytest.mark.parametrize("selector", ["foo:bar", "tag:", "tags:movr", ":x"])
@pytest.mark.parametrize("command", ["compile", "ls"])
def test_malformed_selector_is_a_usage_error(demo_project, command, selector):
    for json_logs in (False, True):
        result = Cli(demo_project)(command, "-s", selector, json_logs=json_logs)
        assert result.exit_code == 2, result.output
        assert result.stderr.strip()
        assert_clean(result)
    assert not (demo_project / "target").exists()


def test_vars_change_the_compiled_sql(demo_project):
    compiled = demo_project / "target" / "compiled" / "vehicles_in_use.sql"
    assert Cli(demo_project)("compile").exit_code == 0
    assert re.search(r"current_battery >= 20\b", compiled.read_text())
    assert manifest(demo_project)["project"]["vars"]["min_battery"] == 20

    result = Cli(demo_project)("compile", "--vars", "{min_battery: 55}")
    assert result.exit_code == 0, result.output
    assert re.search(r"current_battery >= 55\b", compiled.read_text())
    assert manifest(demo_project)["project"]["vars"]["min_battery"] == 55


@pytest.mark.parametrize("text", ["not: [valid", "[1, 2]", "just a string", "{a: 1", "'", "null", "{a: 1, a: 2}"])
@pytest.mark.parametrize("command", ["compile", "ls"])
def test_bad_vars_are_a_usage_error(demo_project, command, text):
    result = Cli(demo_project)(command, "--vars", text)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip()
    assert_clean(result)
    assert not (demo_project / "target").exists()


def test_vars_are_read_like_project_files(init_project):
    """YAML 1.2 booleans and dates as text, as in project.yml: `yes` stays "yes", a date stays a string."""
    result = Cli(init_project)("compile", "--vars", "{since: 2024-01-01, flag: yes, min_amount: 3}")
    assert result.exit_code == 0, result.output
    assert manifest(init_project)["project"]["vars"] == {"since": "2024-01-01", "flag": "yes", "min_amount": 3}
    assert "amount >= 3" in (init_project / "target" / "compiled" / "large_orders.sql").read_text()
