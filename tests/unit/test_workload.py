"""The movr workload commands: `feedctl workload init` and `feedctl workload run` (no Spark)."""

from __future__ import annotations

from deltalake import DeltaTable

from feedctl.project.loader import load_project
from support import Cli


def test_workload_init_creates_the_demo_tables_once_and_run_commits_changes(demo_project):
    cli = Cli(demo_project)
    first = cli("workload", "init", "movr", "--rows", "12")
    assert first.exit_code == 0, first.output
    project, _ = load_project(demo_project)
    tables = {t.name: DeltaTable(t.location) for t in project.tables.values()}
    assert {n: t.to_pyarrow_table().num_rows for n, t in tables.items()} == {"users": 12, "vehicles": 12, "rides": 24}
    assert all(t.metadata().configuration["delta.enableChangeDataFeed"] == "true" for t in tables.values())
    again = cli("workload", "init", "movr")
    assert again.exit_code == 0 and "exists" in again.stdout

    run = cli("workload", "run", "movr", "--duration", "2s", "--rate", "10", "--seed", "3")
    assert run.exit_code == 0, run.output
    versions = sum(DeltaTable(t.location).version() for t in project.tables.values())
    assert versions >= 15, "about 20 commits, each a new Delta version"
    moved = DeltaTable(tables["vehicles"].table_uri).load_cdf(starting_version=1).read_all()
    assert moved.num_rows > 0
    assert cli("workload", "run", "movr", "--duration", "soon").exit_code == 2
