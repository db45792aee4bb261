"""The daemon Spark forks its Python workers from, importing pyspark from the installed package.

Spark puts its own `pyspark.zip` first on the daemon's path, and that zip holds no bytecode: every start
compiled pyspark's modules from source. The installed package is compiled once. Nothing else is imported
before the fork: pyarrow and polars start threads on import, and a lock held by a thread at fork time could
hang a worker.
"""

import os
import sys

sys.path[:] = [p for p in sys.path if not p.endswith("pyspark.zip")]
# Spark runs one task per core already: a polars pool per worker as wide as the machine would have the
# workers fight over the same cores.
os.environ.setdefault("POLARS_MAX_THREADS", "1")

from feedctl.spark.allocator import keep_freed_pages  # noqa: E402

keep_freed_pages()

from pyspark import daemon  # noqa: E402

if __name__ == "__main__":
    daemon.manager()
