"""How many spans a new job gives each table when the project does not say."""

from __future__ import annotations

import os

from feedctl.project.model import Project


def default_spans(project: Project) -> int:
    """Spark's default parallelism, read from the master URL without starting Spark."""
    conf = project.spark.conf.get("spark.default.parallelism")
    if conf:
        return int(conf)
    if project.spark.remote:  # a server's cores are not known before it is reached
        return 8
    master = project.spark.master
    if master.startswith("local["):
        inner = master[6:].split(",")[0].rstrip("]")
        return os.cpu_count() or 1 if inner == "*" else int(inner)
    return 1 if master == "local" else 8
