"""Catch-up throughput: one Delta table's change feed emitted three ways, timed in one run.

    .venv/bin/python bench/catchup.py [--changes 1000000] [--master local[2]] [--parquet] [--kafka]

The table has 6 columns (bigint key, int, two strings, a timestamp, a decimal) and about `--changes`
changes over 10 commits: inserts, then updates and deletes. Each way runs as its own process, start-up
included, and emits JSON `wrapped` with `diff` and `updated` where it can:

(a) `feedctl run` (batch mode, from a fresh state) to a `file://` sink;
(b) the Spark job a user would write instead: the change feed read with `deltalake`, into Spark, `to_json`,
    `write.text`; no ordering, no resolved files, no checkpoints;
(c) the single-process physical path: `deltalake` change feed, polars NDJSON, one file.

`--parquet` adds feedctl writing Parquet; `--kafka` adds feedctl into a local Kafka broker (Tansu). The last
line is `catchup: feedctl=<N> changes/s handwritten=<N> changes/s physical=<N> changes/s`.

`--pushdown` times instead a feed whose CDC query selects one city of the table partitioned by city (10
cities, so 10 partitions), with and without pushdown, alternately (`--rounds` each), in one process once
Spark has started: with it the condition `city = 'city-3'`, without it `concat(city, '') = 'city-3'`, which
selects the same rows but is not given to the reader. Its last line is
`catchup-pushdown: with=<N> without=<N> changes/s speedup=<X>` (medians).

`--connect` times the catch-up through a Spark Connect server (pyspark's own, a process started once with
`--master` before the timings) beside a classic session on `--master`, alternately (`--rounds` each). Its
last line is `catchup-connect: classic=<N> connect=<N> changes/s ratio=<X>` (medians).

`--changes-from log` times the catch-up of a table whose updates and deletes each rewrite a tenth of its files
(50 appends, then 5 updates and 2 deletes, each of a third of the rows in one tenth of the ids), read from
its change data files (`changes: cdf`) and from its log (`changes: log`), alternately (`--rounds` each). Its
last line is `catchup-log: cdf=<N> log=<N> changes/s ratio=<X>` (medians; ratio = log / cdf); the line
before it, `catchup-log-rewrites`, the same from the last append on (the updates and deletes alone).

`--baseline DIR` times another checkout of feedctl (its `framework/`, e.g. a `git worktree` of an earlier
commit) against this one on the same table, alternately, `--rounds` times each: the machine's speed drifts,
so a comparison is made within one run. Its last line is `catchup-compare: baseline=<N> current=<N> changes/s`
(medians).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from proc_memory import Peak, run_measured

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))
BIN = Path(sys.executable).parent

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("qty", pa.int32()),
        ("city", pa.string()),
        ("note", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("price", pa.decimal128(18, 2)),
    ]
)


def rows(start: int, n: int, cities: int = 64) -> pa.Table:
    """Rows `start`.. of the benchmark table, built by Arrow kernels."""
    numbers = np.arange(start, start + n, dtype=np.int64)
    ids = pa.array(numbers)
    return pa.table(
        {
            "id": ids,
            "qty": pc.cast(pc.bit_wise_and(ids, pa.scalar(1023, pa.int64())), pa.int32()),
            "city": pc.binary_join_element_wise("city-", pc.cast(pa.array(numbers % cities), pa.string()), ""),
            "note": pc.binary_join_element_wise("order note ", pc.cast(ids, pa.string()), ""),
            "at": pc.cast(
                pc.add(pc.multiply(ids, pa.scalar(1000, pa.int64())), pa.scalar(1_780_000_000_000_000)),
                pa.timestamp("us", tz="UTC"),
            ),
            "price": pc.cast(pc.divide(pc.cast(ids, pa.float64()), pa.scalar(100.0)), pa.decimal128(18, 2)),
        },
        schema=SCHEMA,
    )


def make_table(path: Path, changes: int, cities: int = 64, partitioned: bool = False) -> int:
    """An empty table (version 0), then 10 commits: 5 of inserts, 3 updates, 2 deletes. Returns the number
    of changes (an update counts once)."""
    write_deltalake(
        str(path),
        SCHEMA.empty_table(),
        configuration={"delta.enableChangeDataFeed": "true"},
        partition_by=["city"] if partitioned else None,
    )
    per = int(changes / 1.5) // 5  # inserts over 5 commits; updates touch 3/10 of them, deletes 2/10
    for i in range(5):
        write_deltalake(str(path), rows(i * per, per, cities), mode="append")
    dt = DeltaTable(str(path))
    for k in range(3):
        dt.update(predicate=f"id % 10 = {k}", updates={"qty": "qty + 1", "note": "'updated'"})
    for k in (3, 4):
        dt.delete(f"id % 10 = {k}")
    total = 5 * per
    return total + sum(len(range(k, total, 10)) for k in range(5))


def make_rewriting_table(path: Path, changes: int) -> tuple[int, int]:
    """An empty table (version 0), 50 appends of contiguous ids (a file each), then 5 updates and 2 deletes,
    each of a third of the rows of one tenth of the ids: each rewrites a tenth of the files. Returns the
    number of changes, and of those the updates and deletes made."""
    write_deltalake(str(path), SCHEMA.empty_table(), configuration={"delta.enableChangeDataFeed": "true"})
    total = int(changes / (1 + 7 / 30)) // 50 * 50
    for i in range(50):
        write_deltalake(str(path), rows(i * total // 50, total // 50), mode="append")
    dt = DeltaTable(str(path))
    band = total // 10
    for k in range(7):
        where = f"id >= {k * band} AND id < {(k + 1) * band} AND id % 3 = 0"
        if k < 5:
            dt.update(predicate=where, updates={"qty": "qty + 1", "note": "'updated'"})
        else:
            dt.delete(where)
    rewritten = sum(len(range(k * band, (k + 1) * band, 3)) for k in range(7))
    return total + rewritten, rewritten


CATCHUP = {"updated": True, "diff": True, "cursor": "version:0"}


def _timed(argv: list[str], env: dict | None = None) -> tuple[float, Peak]:
    done, seconds, peak = run_measured(argv, env or os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return seconds, peak


def write_project(
    root: Path,
    table: Path,
    master: str,
    uri: str,
    options: dict,
    sink_options: dict | None = None,
    query: str | None = None,
    remote: str | None = None,
    changes: str = "auto",
):
    (root / "feeds").mkdir(parents=True)
    spark = {"remote": remote} if remote else {"master": master}
    (root / "sinks").mkdir()
    (root / "project.yml").write_text(
        json.dumps(
            {
                "name": "bench",
                "config-version": 1,
                "state": "sqlite:///target/state.db",
                "spark": {**spark, "conf": {"spark.ui.enabled": "false"}},
                "sources": [
                    {
                        "name": "s",
                        "tables": [{"name": "orders", "path": str(table), "primary_key": ["id"], "changes": changes}],
                    }
                ],
            }
        )
    )
    reads = {"query": "orders.sql"} if query else {"tables": ["s.orders"]}
    if query:
        (root / "feeds" / "orders.sql").write_text(query)
    (root / "feeds" / "f.yml").write_text(
        json.dumps({"feeds": [{"name": "orders", **reads, "sink": "out", "options": options}]})
    )
    (root / "sinks" / "s.yml").write_text(
        json.dumps({"sinks": [{"name": "out", "uri": uri, **({"options": sink_options} if sink_options else {})}]})
    )


def run_feedctl(
    work: Path,
    name: str,
    table: Path,
    master: str,
    uri: str,
    options: dict,
    sink_options: dict | None = None,
    code: Path | None = None,
    remote: str | None = None,
    changes: str = "auto",
) -> tuple[float, Peak]:
    """`feedctl run` of a fresh project holding one feed of `table`: (seconds, peak memory). `code`: the
    `framework/` folder of another checkout to run instead of this one; `remote`: Spark Connect instead of
    `master`; `changes`: where the table's changes are read from."""
    root = work / name
    write_project(root, table, master, uri, options, sink_options, remote=remote, changes=changes)
    env = os.environ.copy()
    if code is not None:  # first on the path, before the installed package; Spark's workers inherit it
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
    return _timed([str(BIN / "feedctl"), "--project-dir", str(root), "run"], env)


def alternately(
    work: Path,
    table: Path,
    master: str,
    options: dict,
    sides: dict[str, dict],
    rounds: int,
    amount: int,
    unit: str,
    label: str,
) -> dict[str, float]:
    """Each side's `feedctl run` (`run_feedctl`'s keyword arguments), alternately, `rounds` times; prints each
    run and returns the median seconds of each side."""
    times: dict[str, list[float]] = {side: [] for side in sides}
    for i in range(rounds):
        for side, how in sides.items():
            name = f"{label}-{side}-{i}"
            seconds, _ = run_feedctl(work, name, table, master, f"file://{work / ('sink-' + name)}", options, **how)
            times[side].append(seconds)
            print(f"{label} {side} {i + 1}: {seconds:6.1f} s ({amount / seconds:.0f} {unit})", flush=True)
    return {side: sorted(v)[len(v) // 2] for side, v in times.items()}


def compare(
    work: Path, table: Path, master: str, options: dict, baseline: Path, rounds: int, amount: int, unit: str, label: str
) -> None:
    """The baseline checkout and this one, alternately, on the same table; prints each run and the medians."""
    sides = {"baseline": {"code": baseline}, "current": {}}
    medians = alternately(work, table, master, options, sides, rounds, amount, unit, label)
    print(
        f"{label}-compare: baseline={amount / medians['baseline']:.0f} current={amount / medians['current']:.0f} "
        f"{unit} (medians of {rounds})",
        flush=True,
    )


PUSHDOWN = {
    "with": "SELECT * FROM {{ source('s', 'orders') }} WHERE city = 'city-3'",
    "without": "SELECT * FROM {{ source('s', 'orders') }} WHERE concat(city, '') = 'city-3'",
}


def compare_connect(work: Path, table: Path, master: str, rounds: int, changes: int) -> None:
    """The catch-up through a Spark Connect server (pyspark's, started once before the timings with `master`,
    as a cluster would be up already) beside a classic session on `master` (its JVM's start counted, as every
    `feedctl run` pays it), alternately, `rounds` times each."""
    from feedctl.testing import connect_server

    started = time.perf_counter()
    with connect_server.start(master, {"spark.driver.memory": "2g"}) as server:
        print(f"connect server: up in {time.perf_counter() - started:.1f} s (not counted)", flush=True)
        sides = {"classic": {}, "connect": {"remote": server.url}}
        medians = alternately(work, table, master, CATCHUP, sides, rounds, changes, "changes/s", "catchup")
    print(
        f"catchup-connect: classic={changes / medians['classic']:.0f} connect={changes / medians['connect']:.0f} "
        f"changes/s ratio={medians['classic'] / medians['connect']:.2f} (medians of {rounds})",
        flush=True,
    )


def compare_pushdown(work: Path, table: Path, master: str, rounds: int, changes: int) -> None:
    """One city's feed with and without pushdown, alternately, in this process: Spark starts once, before
    the timings (its start-up, the same for both, would hide the difference). Both emit the same messages."""
    import shutil

    from feedctl.commands.run import run_feeds
    from feedctl.node.settings import RunSettings

    def catch_up(which: str) -> tuple[float, int]:
        root, sink = work / f"pushdown-{which}", work / f"sink-pushdown-{which}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(sink, ignore_errors=True)
        write_project(
            root, table, master, f"file://{sink}", {"updated": True, "cursor": "version:0"}, query=PUSHDOWN[which]
        )
        started = time.perf_counter()
        run_feeds(root, None, RunSettings())
        return time.perf_counter() - started, lines_in(sink)

    catch_up("with")  # starts Spark
    times: dict[str, list[float]] = {"with": [], "without": []}
    for i in range(rounds):
        for which in PUSHDOWN:
            seconds, messages = catch_up(which)
            times[which].append(seconds)
            print(f"pushdown {which:7} {i + 1}: {seconds:6.1f} s, {messages} messages", flush=True)
    medians = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(
        f"catchup-pushdown: with={changes / medians['with']:.0f} without={changes / medians['without']:.0f} "
        f"changes/s speedup={medians['without'] / medians['with']:.1f}x (medians of {rounds})",
        flush=True,
    )


def lines_in(folder: Path, suffix: str = ".ndjson") -> int:
    return sum(p.read_bytes().count(b"\n") for p in folder.rglob(f"*{suffix}"))


HANDWRITTEN = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession, functions as F

    table, out, master = sys.argv[1:4]
    spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
    cdf = pa.table(DeltaTable(table).load_cdf(starting_version=1).read_all())
    # delta-rs hands out types Spark cannot take: string views, an unsigned commit version
    fixed = {pa.string_view(): pa.string(), pa.uint64(): pa.int64()}
    cdf = cdf.cast(pa.schema([f.with_type(fixed.get(f.type, f.type)) for f in cdf.schema]))
    df = spark.createDataFrame(cdf).where(F.col("_change_type") != "update_preimage")
    df.select(F.to_json(F.struct(*[c for c in df.columns])).alias("value")).write.text(out)
    spark.stop()
""")

PHYSICAL = textwrap.dedent("""
    import sys
    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable

    table, out = sys.argv[1:3]
    cdf = pl.from_arrow(pa.table(DeltaTable(table).load_cdf(starting_version=1).read_all()))
    cdf.filter(pl.col("_change_type") != "update_preimage").write_ndjson(out)
""")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--parquet", action="store_true", help="also time feedctl writing Parquet")
    parser.add_argument("--kafka", action="store_true", help="also time feedctl into a local Kafka broker")
    parser.add_argument(
        "--feedctl-only",
        action="store_true",
        help="time feedctl alone (its throughput and memory at sizes the others cannot take); "
        "with --parquet and --kafka, those lines too",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="a checkout of feedctl to time against this one, alternately (only that comparison)",
    )
    parser.add_argument(
        "--pushdown",
        action="store_true",
        help="one city's feed of a table partitioned by city, with and without pushdown (only that)",
    )
    parser.add_argument(
        "--connect",
        action="store_true",
        help="through a Spark Connect server beside a classic session, alternately (only that)",
    )
    parser.add_argument(
        "--changes-from",
        choices=["log"],
        help="a table whose rewrites touch a tenth of its files, from its change data and from its log (only that)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="runs of each side with --baseline, --pushdown, --connect or --changes-from",
    )
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    with tempfile.TemporaryDirectory(prefix="feedctl-catchup-") as tmp:
        work = Path(tmp)
        table = work / "orders"
        started = time.perf_counter()
        if args.changes_from:
            changes, rewritten = make_rewriting_table(table, args.changes)
            print(f"table: {changes} changes, written in {time.perf_counter() - started:.1f} s", flush=True)
            sides = {"cdf": {"changes": "cdf"}, "log": {"changes": "log"}}
            medians = alternately(
                work, table, args.master, CATCHUP, sides, args.rounds, changes, "changes/s", "catchup"
            )
            emitted = {side: lines_in(work / f"sink-catchup-{side}-0") for side in sides}
            if len(set(emitted.values())) != 1:
                raise SystemExit(f"the two feeds emitted different numbers of messages: {emitted}")
            # the rewrites alone: from the last append on (version 50)
            after_appends = {**CATCHUP, "cursor": "version:50"}
            alone = alternately(
                work, table, args.master, after_appends, sides, args.rounds, rewritten, "changes/s", "rewrites"
            )
            print(
                f"catchup-log-rewrites: cdf={rewritten / alone['cdf']:.0f} log={rewritten / alone['log']:.0f} "
                f"changes/s ratio={alone['cdf'] / alone['log']:.2f} (medians of {args.rounds})",
                flush=True,
            )
            print(
                f"catchup-log: cdf={changes / medians['cdf']:.0f} log={changes / medians['log']:.0f} changes/s "
                f"ratio={medians['cdf'] / medians['log']:.2f} (medians of {args.rounds})",
                flush=True,
            )
            return 0
        changes = make_table(table, args.changes, *((10, True) if args.pushdown else ()))
        print(f"table: {changes} changes over 10 commits, written in {time.perf_counter() - started:.1f} s", flush=True)
        if args.pushdown:
            compare_pushdown(work, table, args.master, args.rounds, changes)
            return 0
        if args.connect:
            compare_connect(work, table, args.master, args.rounds, changes)
            return 0
        if args.baseline:
            compare(
                work,
                table,
                args.master,
                CATCHUP,
                args.baseline.resolve() / "framework",
                args.rounds,
                changes,
                "changes/s",
                "catchup",
            )
            return 0

        feedctl, peak = run_feedctl(work, "feedctl", table, args.master, f"file://{work / 'sink-json'}", CATCHUP)
        print(
            f"feedctl run (json):  {feedctl:6.1f} s, {lines_in(work / 'sink-json')} messages; peak RSS: driver "
            f"{peak.process_mib:.0f} MiB, driver and JVM {peak.tree_mib:.0f} MiB",
            flush=True,
        )
        if not args.feedctl_only:
            handwritten, _ = _timed(
                [sys.executable, "-c", HANDWRITTEN, str(table), str(work / "handwritten"), args.master]
            )
            print(f"handwritten spark:   {handwritten:6.1f} s", flush=True)
            physical, _ = _timed([sys.executable, "-c", PHYSICAL, str(table), str(work / "physical.ndjson")])
            print(f"physical polars:     {physical:6.1f} s", flush=True)
        if args.parquet:
            seconds, _ = run_feedctl(
                work, "parquet", table, args.master, f"file://{work / 'sink-parquet'}", {**CATCHUP, "format": "parquet"}
            )
            print(f"catchup-parquet: feedctl={changes / seconds:.0f} changes/s ({seconds:.1f} s)", flush=True)
        if args.kafka:
            from feedctl.testing import devservers

            with devservers.tansu() as broker:
                seconds, _ = run_feedctl(
                    work, "kafka", table, args.master, f"kafka://{broker.env['KAFKA_BOOTSTRAP']}", CATCHUP
                )
            print(f"catchup-kafka: feedctl={changes / seconds:.0f} msg/s ({seconds:.1f} s)", flush=True)
        if args.feedctl_only:
            print(f"catchup: feedctl={changes / feedctl:.0f} changes/s")
        else:
            print(
                f"catchup: feedctl={changes / feedctl:.0f} changes/s handwritten={changes / handwritten:.0f} "
                f"changes/s physical={changes / physical:.0f} changes/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
