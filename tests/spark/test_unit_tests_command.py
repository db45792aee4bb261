"""`feedctl test`: the unit tests `feedctl init` scaffolds pass as they are, each run through `feedctl run`'s
own code; a wrong expectation fails with the message and the field that differ and a diff; a malformed test
file is an error at its line."""

from __future__ import annotations

import json

import yaml

from support import Cli
from support.spark import SPARK


def _project(init_project):
    project = yaml.safe_load((init_project / "project.yml").read_text())
    project["spark"] = SPARK  # the tests' session
    (init_project / "project.yml").write_text(yaml.safe_dump(project, sort_keys=False))
    return init_project


def test_the_scaffolded_unit_tests_pass_and_a_wrong_expectation_fails_with_a_diff(init_project):
    root = _project(init_project)
    cli = Cli(root)
    result = cli("test", json_logs=True)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["test"], e["status"]) for e in events if e["event"] == "unit_test"] == [
        ("tests/orders.yml::every_change_of_an_order", "passed"),
        ("tests/orders.yml::large_orders_only_with_their_previous_status", "passed"),
    ]
    assert events[-1]["passed"] == 2

    tests = root / "tests" / "orders.yml"
    tests.write_text(tests.read_text().replace("previous_status: open, op: update", "previous_status: new, op: update"))
    result = cli("test", "-s", "large_orders")
    assert result.exit_code == 1
    assert "tests/orders.yml::large_orders_only_with_their_previous_status FAILED" in result.output
    assert "message 2 differs: after.previous_status: expected 'new', emitted 'open'" in result.output
    assert '-{"after": {"amount": "12.50", "customer": "ada", "id": 1, "op": "update", "previous_status": "new"' in (
        result.output
    )
    assert "every_change_of_an_order" not in result.output  # -s: the tests of the feeds it selects
    assert "1 failed" in result.output

    # a test beside its feed, in the feed file
    feeds = root / "feeds" / "orders.yml"
    given = "given: [{table: shop.orders, commits: [[{op: insert, row: {id: 9, amount: 1}}]]}]"
    feeds.write_text(
        feeds.read_text() + f"\nunit_tests:\n  - name: beside\n    feed: orders\n    {given}\n"
        "    expect: [{key: [9], after: {id: 9, customer: null, status: null, amount: 1}}]\n"
    )
    result = cli("test", "-s", "orders")
    assert result.exit_code == 0 and "feeds/orders.yml::beside PASSED" in result.output, result.output


def test_a_malformed_unit_test_is_an_error_at_its_line(init_project):
    root = _project(init_project)
    (root / "tests" / "broken.yml").write_text(
        "unit_tests:\n  - name: a\n    feed: orders\n    given: []\n    expect: []\n"
        "  - name: b\n    feed: nowhere\n    given: []\n    expect: []\n"
        "  - name: c\n    feed: orders\n    given: [{table: shop.orders, commits: [[{op: upsert, row: {}}]]}]\n"
        "    expect: []\n"
    )
    result = Cli(root)("test")
    assert result.exit_code == 1, result.output
    assert "tests/broken.yml:6:1: error FC702" in result.output and "no feed nowhere" in result.output
    assert "tests/broken.yml:10:1: error FC701" in result.output and "{op: insert | update | delete" in result.output


def test_slim_ci_runs_the_unit_tests_of_the_feeds_a_change_made(init_project, tmp_path):
    import shutil

    root = _project(init_project)
    cli = Cli(root)
    assert cli("compile").exit_code == 0
    shutil.copytree(root / "target", tmp_path / "prod")
    result = cli("test", "-s", "state:modified", "--state", str(tmp_path / "prod"))
    assert result.exit_code == 0 and "no unit tests" in result.output  # nothing changed: nothing to run
    query = root / "feeds" / "large_orders.sql"
    query.write_text(query.read_text().replace("customer, status", "status, customer"))
    result = cli("test", "-s", "state:modified", "--state", str(tmp_path / "prod"))
    assert result.exit_code == 0 and "large_orders_only_with_their_previous_status PASSED" in result.output
    assert "every_change_of_an_order" not in result.output and "1 passed" in result.output


def test_unit_tests_run_in_ci_where_the_tables_cannot_be_opened(init_project):
    """The tests' tables take the schemas `schemas.yml` froze: CI needs no access to the tables."""
    import shutil

    root = _project(init_project)
    cli = Cli(root)
    assert cli("schemas", "freeze").exit_code == 0
    shutil.rmtree(root / "data")  # out of reach
    result = cli("test", "-s", "orders")
    assert result.exit_code == 0 and "every_change_of_an_order PASSED" in result.output, result.output
