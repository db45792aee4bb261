"""The `feedctl` command: parse flags, call one function of the package, print, set the exit code.

Exit codes: 0 success; 1 the project or a job has errors; 2 bad command-line usage.
"""

from feedctl.cli import docs, jobs, project, running, workload  # noqa: F401  (each registers its commands)
from feedctl.cli.group import main

__all__ = ["main"]
