"""Initial scan throughput: `feedctl run` of a feed with `initial_scan: yes` over a table of `--rows` rows
(the catch-up benchmark's 6 columns), to JSON in a `file://` sink, from a fresh state, start-up included.

    .venv/bin/python bench/scan.py [--rows 10000000] [--master local[2]]

The last line is `scan: feedctl=<N> rows/s (<rows> rows in <s> s, peak RSS driver <M> MiB, with JVM <M> MiB)`.
With `--baseline DIR [--rounds N]`, another checkout and this one alternately, as in `catchup.py`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from deltalake import write_deltalake

from catchup import SCHEMA, compare, lines_in, rows, run_feedctl

BATCH = 1_000_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="a checkout of feedctl to time against this one")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side with --baseline")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="feedctl-scan-") as tmp:
        work = Path(tmp)
        table = work / "orders"
        started = time.perf_counter()
        write_deltalake(str(table), SCHEMA.empty_table(), configuration={"delta.enableChangeDataFeed": "true"})
        for start in range(0, args.rows, BATCH):
            write_deltalake(str(table), rows(start, min(BATCH, args.rows - start)), mode="append")
        print(f"table: {args.rows} rows, written in {time.perf_counter() - started:.1f} s", flush=True)
        if args.baseline:
            compare(work, table, args.master, {"initial_scan": "yes", "updated": True},
                    args.baseline.resolve() / "framework", args.rounds, args.rows, "rows/s", "scan")
            return 0
        seconds, peak = run_feedctl(work, "scan", table, args.master, f"file://{work / 'sink'}",
                                    {"initial_scan": "yes", "updated": True})
        emitted = lines_in(work / "sink")
        if emitted != args.rows:
            print(f"warning: {emitted} messages for {args.rows} rows", flush=True)
        print(f"scan: feedctl={args.rows / seconds:.0f} rows/s ({args.rows} rows in {seconds:.1f} s, peak RSS driver "
              f"{peak.process_mib:.0f} MiB, with JVM {peak.tree_mib:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
