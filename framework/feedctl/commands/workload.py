"""`feedctl workload init|run movr`: the demo's tables, then a steady mix of changes to them."""

from __future__ import annotations

from feedctl.project.loader import load_project
from feedctl.workload.movr import InitResult, RunStats, init_movr, run_movr


def init(project_dir, rows: int, seed: int) -> InitResult:
    return init_movr(load_project(project_dir)[0], rows, seed)


def run(project_dir, seconds: float, rate: float, seed: int | None) -> RunStats:
    return run_movr(load_project(project_dir)[0], seconds, rate, seed)
