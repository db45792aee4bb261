"""`feedctl test` over many unit tests: the project `feedctl init` writes, with `--tests` tests (half of its
plain feed, half of its CDC-query feed, each of three commits), timed as a user runs it (one process, Spark
start-up included).

    .venv/bin/python bench/unit_tests.py [--tests 50]

The last line is `unit-tests: <N> tests in <S> s (<S> s a test)`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent


def _test(i: int, feed: str) -> dict:
    a, b = 10 * i + 1, 10 * i + 2
    row = {"customer": f"c{i}", "status": "open"}
    commits = [
        [
            {"op": "insert", "row": {"id": a, **row, "amount": 12.5}},
            {"op": "insert", "row": {"id": b, **row, "amount": 7.25}},
        ],
        [{"op": "update", "row": {"id": a, **row, "status": "shipped", "amount": 12.5}}],
        [{"op": "delete", "row": {"id": b}}],
    ]
    if feed == "orders":
        expect = [
            {"key": [a], "after": {"id": a, **row, "amount": 12.5}},
            {"key": [b], "after": {"id": b, **row, "amount": 7.25}},
            {"key": [a], "after": {"id": a, **row, "status": "shipped", "amount": 12.5}},
            {"key": [b], "after": None},
        ]
    else:  # large_orders: amount >= 10, not deletes
        extra = {"previous_status": None, "op": "insert"}
        expect = [
            {"key": [a], "after": {"id": a, **row, "amount": 12.5, **extra}},
            {
                "key": [a],
                "after": {
                    "id": a,
                    **row,
                    "status": "shipped",
                    "amount": 12.5,
                    "previous_status": "open",
                    "op": "update",
                },
            },
        ]
    return {
        "name": f"{feed}_{i}",
        "feed": feed,
        "given": [{"table": "shop.orders", "commits": commits}],
        "expect": expect,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="feedctl-unit-tests-") as tmp:
        root = Path(tmp) / "p"
        subprocess.run([str(BIN / "feedctl"), "init", str(root)], check=True, capture_output=True)
        tests = [_test(i, "orders" if i % 2 else "large_orders") for i in range(args.tests)]
        (root / "tests" / "orders.yml").write_text(yaml.safe_dump({"unit_tests": tests}, sort_keys=False))
        started = time.perf_counter()
        done = subprocess.run(
            [str(BIN / "feedctl"), "--project-dir", str(root), "test"], capture_output=True, text=True
        )
        seconds = time.perf_counter() - started
        print(done.stdout[-1500:], flush=True)
        if done.returncode != 0:
            print(done.stderr[-3000:])
            return 1
    print(f"unit-tests: {args.tests} tests in {seconds:.1f} s ({seconds / args.tests:.2f} s a test)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
