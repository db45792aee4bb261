"""The daemon Spark forks its Python workers from, with what every task needs imported before the fork.

Spark puts its own `pyspark.zip` first on the daemon's path, and that zip holds no bytecode: every start
compiled pyspark's modules from source, and each forked worker then imported polars, pyarrow and the
emitter on its first task. Here pyspark comes from the installed package (compiled once), and the forked
workers inherit the emitter's modules already imported. Nothing here runs a polars or Arrow operation:
their thread pools start lazily, after the fork, in each worker.
"""

import os
import sys

sys.path[:] = [p for p in sys.path if not p.endswith("pyspark.zip")]
# Spark runs one task per core already: a polars pool per worker as wide as the machine would have the
# workers fight over the same cores.
os.environ.setdefault("POLARS_MAX_THREADS", "1")

import feedctl.aggregator.emit  # noqa: E402,F401  (the emitter, pairing and encoders, with polars and pyarrow)
from pyspark import daemon  # noqa: E402

if __name__ == "__main__":
    daemon.manager()
