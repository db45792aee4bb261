"""Helpers of the tests, imported as `support` (pytest's `pythonpath = ["tests"]`, pyproject.toml).

`support.projects`: real projects in temporary folders, real Delta tables, the real CLI (re-exported here).
`support.e2e`: small projects run end to end by `feedctl run` in-process, a reader of sinks, an oracle.
`support.cli`: what the CLI tests check of a command's output.
`support.spark`: the Spark settings of the tests and the package's module that holds the process's session.
`support.markers`: how each folder's conftest.py marks the tests it holds.
"""

from support.projects import FIXTURES, REPO, Cli, copy_demo_project, copy_fixture, json_lines, write_delta, write_files

__all__ = ["FIXTURES", "REPO", "Cli", "copy_demo_project", "copy_fixture", "json_lines", "write_delta", "write_files"]
