"""Real projects in temporary folders, real Delta tables, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures"
REPO = TESTS.parent

_TYPES = {
    "int64": pa.int64(),
    "int32": pa.int32(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "float64": pa.float64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "decimal": pa.decimal128(18, 2),
    "date": pa.date32(),
    "binary": pa.binary(),
    "map": pa.map_(pa.string(), pa.int64()),
}


def write_delta(
    path: Path,
    columns: dict[str, str],
    rows: list[dict] | None = None,
    partition_by: list[str] | None = None,
    change_data_feed: bool = True,
    not_null: tuple[str, ...] = (),
) -> Path:
    """Create a Delta table, with its change data feed on unless told; `columns` maps names to types in
    _TYPES; those in `not_null` are NOT NULL."""
    from deltalake import write_deltalake

    schema = pa.schema([pa.field(name, _TYPES[kind], name not in not_null) for name, kind in columns.items()])
    table = pa.Table.from_pylist(rows or [], schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(
        str(path),
        table,
        partition_by=partition_by,
        configuration={"delta.enableChangeDataFeed": "true" if change_data_feed else "false"},
    )
    return path


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write a project from {relative path: text}."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def copy_fixture(name: str, dest: Path) -> Path:
    shutil.copytree(FIXTURES / name, dest, dirs_exist_ok=True)
    return dest


def copy_demo_project(dest: Path) -> Path:
    """A copy of the repository's demo project (its files only, no target/)."""
    dest.mkdir()
    for name in ("project.yml", "feeds", "sinks", "macros"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name)
        else:
            shutil.copy(source, dest / name)
    return dest


class Cli:
    """Runs `feedctl` in-process, as a user would type it."""

    def __init__(self, project_dir: Path | None = None):
        self.project_dir = project_dir

    def __call__(self, *args: str, json_logs: bool = False, env: dict | None = None):
        from feedctl.cli import main

        argv = []
        if self.project_dir is not None:
            argv += ["--project-dir", str(self.project_dir)]
        if json_logs:
            argv += ["--log-format", "json"]
        result = CliRunner().invoke(main, argv + list(args), env=env, catch_exceptions=False)
        return result


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def feedctl_process(root: Path, *args: str, kill_at: str | None = None, env: dict | None = None):
    """`feedctl` as a process of its own (a session of its own, so that a kill reaches it alone), as
    production starts it; a `run` retries a failing batch five times without the waits."""
    knob = ("--testing-kill-at", kill_at) if kill_at else ()
    if args[0] == "run":
        knob += ("--testing-retry-backoff", "0.05")
    return subprocess.run(
        [sys.executable, "-m", "feedctl.cli", "--project-dir", str(root), *args, *knob],
        capture_output=True,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})},
        timeout=900,
        start_new_session=True,
    )


def demo_on_s3(root: Path, spark: dict, staging: str = "s3://stage/feedctl") -> None:
    """The demo project copied at `root` with its tables, staging and sinks on S3 (the `s3` fixture's server,
    its endpoint and credentials in the environment) and `spark` as project.yml's `spark:`."""
    import yaml

    project = yaml.safe_load((root / "project.yml").read_text())
    project["spark"] = spark
    project["staging"] = staging
    source = project["sources"][0]
    source["storage_options"] = {"AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    for table in source["tables"]:
        table["path"] = f"s3://warehouse/movr/{table['name']}"
    (root / "project.yml").write_text(yaml.safe_dump(project, sort_keys=False))
    sinks = yaml.safe_load((root / "sinks" / "local.yml").read_text())
    for sink in sinks["sinks"]:
        sink["uri"] = f"s3://sinks/{sink['name']}"
    (root / "sinks" / "local.yml").write_text(yaml.safe_dump(sinks, sort_keys=False))
