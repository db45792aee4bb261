"""Initial scan throughput: `feedctl run` of a feed with `initial_scan: yes` over a table of `--rows` rows
(the catch-up benchmark's 6 columns), to JSON in a `file://` sink, from a fresh state, start-up included.

    .venv/bin/python bench/scan.py [--rows 10000000] [--master local[2]] [--deletion-vectors]

`--deletion-vectors` gives every data file a deletion vector deleting one row in ten, as Databricks' DELETE
does (a commit written per the protocol: the files removed and added again with their vectors, stored in one
file of framed 64-bit RoaringBitmaps), and turns the table's `deletionVectors` feature on. The last line is
`scan: feedctl=<N> rows/s (<rows> rows in <s> s, peak RSS driver <M> MiB, with JVM <M> MiB)`.
With `--baseline DIR [--rounds N]`, another checkout and this one alternately, as in `catchup.py`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from catchup import SCHEMA, compare, lines_in, rows, run_feedctl
from deltalake import write_deltalake

BATCH = 1_000_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="a checkout of feedctl to time against this one")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side with --baseline")
    parser.add_argument("--deletion-vectors", action="store_true", help="delete one row in ten by deletion vectors")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="feedctl-scan-") as tmp:
        work = Path(tmp)
        table = work / "orders"
        started = time.perf_counter()
        write_deltalake(str(table), SCHEMA.empty_table(), configuration={"delta.enableChangeDataFeed": "true"})
        for start in range(0, args.rows, BATCH):
            write_deltalake(str(table), rows(start, min(BATCH, args.rows - start)), mode="append")
        expected = args.rows
        if args.deletion_vectors:
            expected -= delete_by_vectors(table, every=10)
        print(f"table: {expected} rows, written in {time.perf_counter() - started:.1f} s", flush=True)
        if args.baseline:
            compare(
                work,
                table,
                args.master,
                {"initial_scan": "yes", "updated": True},
                args.baseline.resolve() / "framework",
                args.rounds,
                args.rows,
                "rows/s",
                "scan",
            )
            return 0
        seconds, peak = run_feedctl(
            work, "scan", table, args.master, f"file://{work / 'sink'}", {"initial_scan": "yes", "updated": True}
        )
        emitted = lines_in(work / "sink")
        if emitted != expected:
            print(f"warning: {emitted} messages for {expected} rows", flush=True)
        print(
            f"scan: feedctl={expected / seconds:.0f} rows/s ({expected} rows in {seconds:.1f} s, peak RSS driver "
            f"{peak.process_mib:.0f} MiB, with JVM {peak.tree_mib:.0f} MiB)"
        )
    return 0


def delete_by_vectors(table: Path, every: int) -> int:
    """Delete every `every`-th row of each data file with a deletion vector, in one commit; the rows deleted."""
    import json
    import struct
    import uuid
    import zlib

    from deltalake import DeltaTable
    from pyroaring import BitMap64

    from feedctl.source.deletion_vector import MAGIC

    dt = DeltaTable(str(table))
    version = dt.version()
    log = table / "_delta_log"
    adds = [
        json.loads(line)["add"]
        for v in range(version + 1)
        for line in (log / f"{v:020d}.json").read_text().splitlines()
        if '"add"' in line
    ]
    name = uuid.uuid4()
    blob, actions, deleted = bytearray(b"\x01"), [], 0
    for add in adds:
        rows = json.loads(add["stats"])["numRecords"]
        bitmap = BitMap64(range(0, rows, every))
        data = struct.pack("<I", MAGIC) + bitmap.serialize()
        offset = len(blob)
        blob += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
        vector = {
            "storageType": "u",
            "pathOrInlineDv": _z85(name.bytes),
            "offset": offset,
            "sizeInBytes": len(data),
            "cardinality": len(bitmap),
        }
        actions.append(
            {
                "remove": {
                    "path": add["path"],
                    "deletionTimestamp": 0,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": add["partitionValues"],
                    "size": add["size"],
                }
            }
        )
        actions.append({"add": {**add, "deletionVector": vector}})
        deleted += len(bitmap)
    (table / f"deletion_vector_{name}.bin").write_bytes(bytes(blob))
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "changeDataFeed"],
        }
    }
    commit = [{"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "DELETE"}}, protocol, *actions]
    (log / f"{version + 1:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in commit))
    return deleted


def _z85(data: bytes) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
    return "".join(
        alphabet[int.from_bytes(data[i : i + 4], "big") // 85**p % 85]
        for i in range(0, len(data), 4)
        for p in range(4, -1, -1)
    )


if __name__ == "__main__":
    sys.exit(main())
