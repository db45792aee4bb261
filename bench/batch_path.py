"""The fixed cost of one batch of a feed without a CDC query, on a classic session, by the two ways Spark can
run it: Spark's core API (`parallelize` and `mapPartitions`, no query plan: what a classic session uses) and
DataFrames (`range` and `mapInArrow`: what Spark Connect serves, and what a classic session would use if it
had one path). Small batches (a few hundred changes over two spans), so what is timed is Spark's part.

    .venv/bin/python bench/batch_path.py [--batches 30]

The first batch of a run, which pays for the classes and code its way loads, is timed in a process of its own
per way (a fresh session each); then both ways run alternately in one process and session, `--batches`
each. The last line is `batch-path: core first=<S>s median=<S>s frames first=<S>s median=<S>s`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "framework"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=30, help="batches through each way after its first")
    parser.add_argument("--first", choices=["core", "frames"], help=argparse.SUPPRESS)  # one first batch, alone
    args = parser.parse_args()
    if args.first is None:
        first = {way: _first_alone(way) for way in ("core", "frames")}
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from feedctl.encoding.envelope import Envelope
    from feedctl.spark.place import SparkPlace
    from feedctl.spark.session import spark_session
    from feedctl.spark.training import small_batch
    from feedctl.tasks import batch

    spark = spark_session(SparkPlace("local[2]"))
    with tempfile.TemporaryDirectory(prefix="feedctl-batch-path-") as tmp:
        staged, sink = small_batch(Path(tmp), 500)

        def one(way: str, seq: int) -> float:
            target = sink.target("s.t", "t", 1, 1, seq, "json", Envelope(updated=True, diff=True))
            table = batch.TableBatch(
                "s.t", staged.spans(), staged.schema, ["id", "v"], ["id"], [0, 1], None, target, "1.0", True
            )
            started = time.perf_counter()
            files = batch._plain(spark, [(0, table)]) if way == "core" else batch._frames(spark, [(0, table)])
            assert len(files) == 2, files
            return time.perf_counter() - started

        seq = iter(range(1, 1_000_000))
        if args.first:
            print(f"{one(args.first, next(seq)):.4f}")
            return 0
        rest: dict[str, list[float]] = {"core": [], "frames": []}
        for _ in range(args.batches):
            for way in rest:
                rest[way].append(one(way, next(seq)))
    medians = {way: statistics.median(times) for way, times in rest.items()}
    for way in rest:
        print(f"{way:6}: first batch {first[way]:.3f} s, then median {medians[way]:.3f} s over {args.batches}")
    print(
        f"batch-path: core first={first['core']:.2f}s median={medians['core']:.3f}s "
        f"frames first={first['frames']:.2f}s median={medians['frames']:.3f}s"
    )
    return 0


def _first_alone(way: str) -> float:
    import subprocess

    done = subprocess.run(
        [sys.executable, __file__, "--first", way], capture_output=True, text=True, check=True, env=os.environ
    )
    return float(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    raise SystemExit(main())
