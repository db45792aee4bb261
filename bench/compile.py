"""Time `feedctl compile` on a generated project of 500 feeds over 50 real Delta tables.

Half the feeds watch tables directly, half run a CDC query with a macro, var() and source(); every table
exists, so every column is checked. Each timing is a whole `feedctl compile` process, start-up included.

    .venv/bin/python bench/compile.py [--feeds 500] [--tables 50] [--runs 5] [--missing-tables]

Each run times a cold compile (no target/) and then a warm one (the same project again).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

FEEDCTL = Path(sys.executable).parent / "feedctl"


def generate(root: Path, feeds: int, tables: int, missing: bool = False) -> None:
    (root / "feeds").mkdir(parents=True)
    (root / "sinks").mkdir()
    (root / "macros").mkdir()
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("region", pa.string()),
            ("status", pa.string()),
            ("amount", pa.decimal128(18, 2)),
            ("updated_at", pa.timestamp("us", tz="UTC")),
            ("score", pa.int32()),
        ]
    )
    table_lines = []
    for t in range(tables):
        path = root / "warehouse" / f"t{t:03d}"
        if not missing:  # else a table compile cannot open, as in CI without credentials
            write_deltalake(
                str(path), pa.Table.from_pylist([], schema=schema), configuration={"delta.enableChangeDataFeed": "true"}
            )
        table_lines.append(f"      - {{name: t{t:03d}, path: warehouse/t{t:03d}, primary_key: [region, id]}}")
    (root / "project.yml").write_text(
        "name: bench\nconfig-version: 1\nsources:\n  - name: src\n    tables:\n"
        + "\n".join(table_lines)
        + "\nvars:\n  min_score: 10\n"
    )
    # A folder per feed: feeds sharing one would each be warned of (FC305), as a project should not be.
    (root / "sinks" / "sinks.yml").write_text(
        "sinks:\n"
        + "".join(
            f"  - {{name: sink{s}, uri: 'file://out/s{s}', options: {{file_size: 16MiB}}}}\n" for s in range(feeds)
        )
    )
    (root / "macros" / "m.sql").write_text(
        "{% macro bucket(c) -%}CASE WHEN {{ c }} > 50 THEN 'high' ELSE 'low' END{%- endmacro %}\n"
    )
    lines = ["feeds:"]
    for f in range(feeds):
        table = f"src.t{f % tables:03d}"
        if f % 2:
            (root / "feeds" / f"q{f}.sql").write_text(
                f"SELECT id, region, status, {{{{ bucket('score') }}}} AS bucket, cdc_prev.status AS was\n"
                f"FROM {{{{ source('src', 't{f % tables:03d}') }}}}\n"
                f"WHERE region = 'r{f % 7}' AND score >= {{{{ var('min_score') }}}} AND event_op() != 'delete'\n"
            )
            lines.append(
                f"  - {{name: feed_{f}, query: q{f}.sql, sink: sink{f}, tags: [t{f % 5}],"
                f" options: {{resolved: 10s, min_checkpoint_frequency: 10s, envelope: wrapped}}}}"
            )
        else:
            lines.append(
                f"  - {{name: feed_{f}, tables: [{table}], sink: sink{f}, options: {{updated: true, diff: true}}}}"
            )
    (root / "feeds" / "feeds.yml").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=500)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--missing-tables",
        action="store_true",
        help="Tables compile cannot open (their columns unchecked), as in CI without credentials.",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        generate(root, args.feeds, args.tables, args.missing_tables)
        cold, warm = [], []
        for _ in range(args.runs):
            shutil.rmtree(root / "target", ignore_errors=True)  # nothing kept from an earlier compile
            cold.append(_timed(root))
            warm.append(_timed(root))  # the same project again: what it kept of the first is reused
        for name, times, goal in (("cold", cold, 2.0), ("warm", warm, 0.5)):
            print(
                f"compile {name}: feeds={args.feeds} tables={args.tables} missing={args.missing_tables} "
                f"median={statistics.median(times):.2f}s best={min(times):.2f}s goal<={goal:.2f}s "
                f"({', '.join(f'{t:.2f}' for t in times)})"
            )


def _timed(root: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(FEEDCTL), "--project-dir", str(root), "compile"], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"compile failed:\n{done.stdout}\n{done.stderr}")
    return seconds


if __name__ == "__main__":
    main()
