"""`feedctl schemas freeze` and compiling without the tables: a query's columns checked against schemas.yml
where its table cannot be opened, a table that moved on from it warned of, a broken file said so, and no
storage client's own log lines when a table is out of reach."""

from __future__ import annotations

import os
import shutil
import subprocess

import pyarrow as pa
import yaml
from deltalake import write_deltalake

from support import Cli, write_delta
from support.cli import diagnostics, feedctl_script
from support.e2e import file_sink, write_project

QUERY = "SELECT id, status FROM {{ source('s', 'orders') }} WHERE amount > 10\n"


def _project(tmp_path, query: str = QUERY):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "warehouse/orders", "primary_key": ["id"]}},
        [{"name": "big", "query": "big.sql", "sink": "out"}],
        [file_sink("out")],
        files={"feeds/big.sql": query},
    )
    write_delta(
        root / "warehouse/orders",
        {"id": "int64", "status": "string", "amount": "float64"},
        [{"id": 1, "status": "open", "amount": 20.0}],
    )
    return root


def test_freeze_writes_the_tables_columns_and_types(tmp_path):
    root = _project(tmp_path)
    result = Cli(root)("schemas", "freeze")
    assert result.exit_code == 0, result.output
    assert "1 of 1 table " in result.output
    frozen = yaml.safe_load((root / "schemas.yml").read_text())
    assert frozen == {
        "tables": [
            {
                "name": "s.orders",
                "version": 0,
                "partition_columns": [],
                "columns": [
                    {"name": "id", "type": "long"},
                    {"name": "status", "type": "string"},
                    {"name": "amount", "type": "double"},
                ],
            }
        ]
    }
    assert (root / "schemas.yml").read_text().startswith("# The columns of the project's tables")


def test_compile_checks_queries_against_frozen_columns_where_the_table_is_out_of_reach(tmp_path):
    root = _project(tmp_path, QUERY.replace("status", "stauts"))
    cli = Cli(root)
    assert cli("schemas", "freeze").exit_code == 0
    shutil.rmtree(root / "warehouse")  # CI: no access to the tables

    result = cli("compile", json_logs=True)
    assert result.exit_code == 1
    [found] = diagnostics(result)
    assert (found["code"], found["file"], found["line"]) == ("FC518", "feeds/big.sql", 1)
    assert 'did you mean "status"' in found["hint"]

    (root / "feeds/big.sql").write_text(QUERY)
    result = cli("compile", "--warn-error")
    assert result.exit_code == 0, result.output  # checked, so no FC521 either


def test_without_frozen_columns_an_unreachable_table_is_a_warning_saying_how_to_freeze(tmp_path):
    root = _project(tmp_path)
    shutil.rmtree(root / "warehouse")
    result = Cli(root)("compile", json_logs=True)
    assert result.exit_code == 0
    [found] = diagnostics(result)
    assert found["code"] == "FC521" and "feedctl schemas freeze" in found["hint"]


def test_a_table_that_moved_on_from_its_frozen_columns_is_warned_of(tmp_path):
    root = _project(tmp_path)
    cli = Cli(root)
    assert cli("schemas", "freeze").exit_code == 0
    write_deltalake(
        str(root / "warehouse/orders"),
        pa.table({"id": [2], "status": ["open"], "amount": [1.0], "tier": ["gold"]}),
        mode="append",
        schema_mode="merge",
    )
    result = cli("compile", json_logs=True)
    assert result.exit_code == 0
    [found] = diagnostics(result)
    assert (found["code"], found["file"]) == ("FC523", "project.yml")
    assert "table s.orders differs from schemas.yml: column tier added" in found["message"]
    assert cli("schemas", "freeze").exit_code == 0
    assert diagnostics(cli("compile", json_logs=True)) == []


def test_a_broken_schemas_file_is_an_error_where_it_is_broken(tmp_path):
    root = _project(tmp_path)
    (root / "schemas.yml").write_text("tables:\n  - name: s.orders\n    columns: 3\n")
    result = Cli(root)("compile", json_logs=True)
    assert result.exit_code == 1
    [found] = diagnostics(result)
    assert (found["code"], found["file"], found["line"]) == ("FC522", "schemas.yml", 2)


def test_a_table_in_s3_without_credentials_warns_without_storage_client_logs(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "s3://feedctl-no-such-bucket/orders", "primary_key": ["id"]}},
        [{"name": "f", "tables": ["s.orders"], "sink": "out"}],
        [file_sink("out")],
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RUST_LOG"))}
    done = subprocess.run(
        [str(feedctl_script()), "--project-dir", str(root), "compile"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "warning FC521" in done.stderr + done.stdout
    assert "aws_config" not in done.stderr and " WARN " not in done.stderr, done.stderr
