"""Parquet, Avro and CSV files in cloud storage: the columns CockroachDB writes (or an Avro container with its
schema), resolved files a Parquet reader can read, and `feedctl verify` reading each format back."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
from decimal import Decimal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from support import Cli
from support.e2e import Table, run, sink_dir, write_project

COLUMNS = {"id": "int64", "name": "string", "at": "timestamp", "price": "decimal", "day": "date", "score": "float64"}
T0 = dt.datetime(2026, 11, 1, 12, 30, tzinfo=dt.timezone.utc)
ROWS = [
    {
        "id": i,
        "name": f"r{i}" if i % 7 else None,
        "at": T0 + dt.timedelta(seconds=i),
        "price": Decimal(f"{i}.25"),
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=i),
        "score": i / 4,
    }
    for i in range(1, 41)
]
CHANGING = {"updated": True, "diff": True, "mvcc_timestamp": True, "resolved": True, "min_checkpoint_frequency": "0s"}


def change(table: Table) -> None:
    table.update("id <= 5", price="price + 1")
    table.delete("id > 35")
    table.append([{**ROWS[0], "id": 100 + i, "name": f"new{i}"} for i in range(3)])


def files(root, sink: str, suffix: str) -> list:
    return sorted(p for p in sink_dir(root, sink).rglob("*") if p.name.endswith(suffix))


def verified(root, feed: str) -> dict:
    result = Cli(root)("verify", feed, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, result.stdout
    return report


def test_parquet_avro_and_csv_feeds_write_their_formats_and_verify(tmp_path):
    table = Table(tmp_path / "data" / "items", COLUMNS, ["id"], ROWS)
    root = write_project(
        tmp_path / "p",
        {"items": {"path": str(table.path), "primary_key": ["id"], "spans": 2}},
        [
            {"name": "pq", "tables": ["s.items"], "sink": "pq", "options": {**CHANGING, "format": "parquet"}},
            {"name": "av", "tables": ["s.items"], "sink": "av", "options": {**CHANGING, "format": "avro"}},
            {"name": "csv", "tables": ["s.items"], "sink": "csv", "options": {"format": "csv", "initial_scan": "only"}},
        ],
        [
            {"name": "pq", "uri": "file://target/sink/pq", "options": {"compression": "zstd"}},
            {"name": "av", "uri": "file://target/sink/av", "options": {"compression": "gzip"}},
            {"name": "csv", "uri": "file://target/sink/csv", "options": {"compression": "gzip"}},
        ],
    )
    first = run(root)
    assert {f: first[f].messages for f in first} == {"pq": 40, "av": 40, "csv": 40}
    change(table)
    second = run(root)
    assert second["pq"].messages == second["av"].messages == 5 + 5 + 3

    # Parquet: the row, then CockroachDB's __crdb__ columns; a delete keeps its key; resolved files are Parquet.
    frames = [pl.read_parquet(p) for p in files(root, "pq", ".parquet")]
    rows = pl.concat(frames)
    assert rows.columns == [
        *COLUMNS,
        "__crdb__event_type",
        "__crdb__updated",
        "__crdb__mvcc_timestamp",
        "__crdb__before",
    ]
    assert rows.schema["at"] == pl.Datetime("us", "UTC") and rows.schema["price"] == pl.Decimal(18, 2)
    counts = dict(rows["__crdb__event_type"].value_counts().iter_rows())
    assert counts == {"c": 40 + 3, "u": 5, "d": 5}
    deletes = rows.filter(pl.col("__crdb__event_type") == "d")
    assert sorted(deletes["id"]) == [36, 37, 38, 39, 40] and deletes["name"].null_count() == 5
    assert [json.loads(b)["id"] for b in deletes["__crdb__before"]] == deletes["id"].to_list()
    assert pq.ParquetFile(files(root, "pq", ".parquet")[0]).metadata.row_group(0).column(0).compression == "ZSTD"
    resolved = files(root, "pq", ".RESOLVED")
    assert resolved and pq.read_table(resolved[-1]).column_names == ["__crdb__resolved"]
    assert verified(root, "pq")["messages"] == 40 + 13

    # Avro: a container file with its schema; deflate inside, no .gz on the name.
    avro = files(root, "av", ".avro")
    assert avro and not files(root, "av", ".gz")
    data = avro[0].read_bytes()
    assert data[:4] == b"Obj\x01" and b'"name":"items"' in data.replace(b" ", b"") and b"deflate" in data
    record = pl.read_avro(io.BytesIO(data))
    assert record.columns == ["after", "before", "key", "updated", "mvcc_timestamp"]
    assert verified(root, "av")["messages"] == 40 + 13

    # CSV: the row's columns, no header, gzipped.
    csv = files(root, "csv", ".csv.gz")
    assert csv
    lines = [line for p in csv for line in gzip.decompress(p.read_bytes()).decode().splitlines()]
    assert sorted(int(line.split(",")[0]) for line in lines) == list(range(1, 41))  # no header line
    assert verified(root, "csv")["messages"] == 40


def test_verify_finds_a_parquet_row_that_was_changed(tmp_path):
    table = Table(tmp_path / "data" / "items", COLUMNS, ["id"], ROWS)
    root = write_project(
        tmp_path / "p",
        {"items": {"path": str(table.path), "primary_key": ["id"], "spans": 1}},
        [{"name": "pq", "tables": ["s.items"], "sink": "pq", "options": {**CHANGING, "format": "parquet"}}],
        [{"name": "pq", "uri": "file://target/sink/pq"}],
    )
    run(root)
    [path] = files(root, "pq", ".parquet")
    tampered = pq.read_table(path)
    names = tampered.column("name").to_pylist()
    names[3] = "tampered"
    tampered = tampered.set_column(1, "name", pa.array(names, pa.string()))
    pq.write_table(tampered, path)
    result = Cli(root)("verify", "pq", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["checks"]["content"]["count"] == 1, report
