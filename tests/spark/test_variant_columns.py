"""VARIANT columns (Delta's `variantType`), written by Spark 4 (`parse_json`, casts to VARIANT, shredded and
not) into Parquet under a Delta log written here as Databricks writes it, read by feedctl as the JSON text
Spark's own `to_json` gives the same values, followed by `feedctl run` from before the table's first version
through an insert, an update and a delete, and judged by `feedctl verify` (whose second reader decodes
VARIANTs apart from the source's decoder)."""

from __future__ import annotations

import json
import shutil
import time
from decimal import Decimal
from pathlib import Path

import pytest

from support.e2e import assert_verified, file_sink, read_sink, run, sink_dir, write_project

# Every kind of value the Variant encoding has, as Spark makes them: JSON texts through `parse_json`, the rest
# through casts (a struct's fields through `to_variant_object`).
JSON_TEXTS = [
    '{"a":1,"b":[1,2.5,"x",null,true],"c":{"d":"e","f":{"g":[]}}}',
    "12345678901234",
    '"a short string"',
    '"' + "a string longer than the sixty-three bytes a short string holds, with é and 😀" + '"',
    "null",
    "true",
    "false",
    "1.25e10",
    "-0.000125",
    "3.14159265358979323846",
    "123456789012345678901234567890.5",
    "[]",
    "{}",
    '{"quote\\"":"back\\\\slash","control":"\\u0001\\n\\t"}',
    "[" + ",".join(str(i) for i in range(300)) + "]",  # more elements than a byte counts
    "{" + ",".join(f'"k{i:03d}":{i}' for i in range(300)) + "}",  # more keys than a byte numbers
    '[{"x":1},{"x":2,"y":[{"z":null}]}]',
]
CASTS = [
    "cast(cast(-7 as tinyint) as variant)",
    "cast(cast(300 as smallint) as variant)",
    "cast(70000 as variant)",
    "cast(9000000000 as variant)",
    "cast(cast(0.1 as float) as variant)",
    "cast(cast(1e-5 as double) as variant)",
    "cast(cast('NaN' as double) as variant)",
    "cast(cast(12.50 as decimal(4,2)) as variant)",
    "cast(cast(-1234567890.123 as decimal(18,3)) as variant)",
    "cast(cast('12345678901234567890123456789.123456789' as decimal(38,9)) as variant)",
    "cast(date'2024-02-29' as variant)",
    "cast(date'0001-01-01' as variant)",
    "cast(timestamp'2024-01-01 12:00:00.100000' as variant)",
    "cast(timestamp'1969-12-31 23:59:59.999999' as variant)",
    "cast(timestamp_ntz'2024-01-01 12:00:00' as variant)",
    "cast(X'00FF10' as variant)",
    "to_variant_object(named_struct('d', date'2024-01-02', 't', timestamp'2024-01-01 00:00:00.5',"
    " 'n', cast(null as int), 'm', map('k', 1), 'l', array(1, 2), 'b', X'01'))",
]


def _values(spark):
    texts = ", ".join(f"parse_json('{t.replace(chr(92), chr(92) * 2)}')" for t in JSON_TEXTS)
    items = [texts, *CASTS, "cast(null as variant)"]
    return spark.sql(f"SELECT posexplode(array({', '.join(items)})) AS (id, v)")


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """Parquet files of the values, unshredded and shredded, and Spark's `to_json` of each (in UTC)."""
    folder = tmp_path_factory.mktemp("variant")
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        values = _values(spark)
        oracle = {r["id"]: r["j"] for r in values.selectExpr("id", "to_json(v) AS j").collect()}
        plain = _parquet(values, folder / "plain")
        updated = _parquet(
            values.where("id % 3 != 0").selectExpr("id", "CASE WHEN id % 3 = 1 THEN v END AS v"), folder / "up"
        )
        spark.conf.set("spark.sql.variant.writeShredding.enabled", "true")
        spark.conf.set("spark.sql.variant.forceShreddingSchemaForTest", "a int, b array<int>, c struct<d string>")
        shredded = _parquet(values.selectExpr("id + 1000 AS id", "v"), folder / "shredded")
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        spark.conf.unset("spark.sql.variant.writeShredding.enabled")
        spark.conf.unset("spark.sql.variant.forceShreddingSchemaForTest")
    return {"plain": plain, "updated": updated, "shredded": shredded, "oracle": oracle}


def _parquet(frame, folder: Path) -> Path:
    frame.coalesce(1).write.parquet(str(folder))
    [part] = folder.glob("part-*.parquet")
    return part


def _table(path: Path, written: dict) -> Path:
    """Version 0: the values; 1: the same, shredded, under ids + 1000; 2: the file of version 0 rewritten
    (a third of the rows deleted, a third set to SQL NULL, a third as they were)."""
    (path / "_delta_log").mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "variant", "nullable": True, "metadata": {}},
        ],
    }
    features = ["variantType", "variantShredding-preview"]
    now = int(time.time() * 1000) - 60_000

    def add(file: Path) -> dict:
        shutil.copy(file, path / file.name)
        return {
            "add": {
                "path": file.name,
                "partitionValues": {},
                "size": file.stat().st_size,
                "modificationTime": now,
                "dataChange": True,
            }
        }

    def commit(version: int, *actions: dict) -> None:
        info = {"commitInfo": {"timestamp": now + version * 1000, "operation": "WRITE"}}
        (path / "_delta_log" / f"{version:020d}.json").write_text(
            "".join(json.dumps(a) + "\n" for a in (info, *actions))
        )

    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features, "writerFeatures": features}
    metadata = {
        "id": "6b1b0c66-8a8f-4b4e-9d1e-2f1a4a0b7c11",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": now,
    }
    commit(0, {"protocol": protocol}, {"metaData": metadata}, add(written["plain"]))
    commit(1, add(written["shredded"]))
    gone = {"path": written["plain"].name, "deletionTimestamp": now, "dataChange": True}
    commit(2, {"remove": gone}, add(written["updated"]))
    return path


def _expected(written: dict) -> dict[int, str | None]:
    """id -> Spark's JSON text of its value at the newest version (None: SQL NULL)."""
    oracle = written["oracle"]
    out = {i + 1000: j for i, j in oracle.items()}
    out.update({i: (j if i % 3 == 1 else None) for i, j in oracle.items() if i % 3 != 0})
    return out


def test_a_variant_is_read_as_the_json_text_spark_gives_it(written, tmp_path):
    from feedctl.source.delta import DeltaSource

    source = DeltaSource("s.t", str(_table(tmp_path / "t", written)))
    oracle = written["oracle"]
    first = source.snapshot(0).read_all().to_pylist()
    assert {r["id"]: r["v"] for r in first} == oracle  # the very text, number for number
    shredded = source.changes(0, 1).read_all().to_pylist()
    assert {r["id"] - 1000: r["v"] for r in shredded} == oracle
    newest = source.snapshot(2).read_all().to_pylist()
    assert {r["id"]: r["v"] for r in newest} == _expected(written)


def test_verifys_second_reader_decodes_a_variant_as_spark_does(written, tmp_path):
    from feedctl.verify.second_reader import SecondReader

    second = SecondReader("s.t", str(_table(tmp_path / "t", written)), None)
    oracle = written["oracle"]
    assert {r["id"]: r["v"] for r in second.rows(0).to_pylist()} == oracle
    assert {r["id"] - 1000: r["v"] for r in second.rows(1).to_pylist() if r["id"] >= 1000} == oracle
    assert {r["id"]: r["v"] for r in second.rows(2).to_pylist()} == _expected(written)


def _messages(root: Path, sink: str) -> list[dict]:
    """The sink's messages, their numbers read with every digit."""
    files = read_sink(sink_dir(root, sink))
    return [json.loads(line, parse_float=Decimal) for f in files if not f.resolved for line in f.text.splitlines()]


def _value(text: str | None):
    return None if text is None else json.loads(text, parse_float=Decimal)


def test_variant_columns_are_followed_and_emitted_as_json(written, tmp_path):
    """JSON messages hold a VARIANT as the JSON it is, as does a CDC query passing it through under another
    name; Parquet messages hold its text. Every message of the history, and `verify` clean."""
    path = _table(tmp_path / "data" / "t", written)
    table = {"path": str(path), "primary_key": ["id"], "spans": 2, "changes": "log"}
    start = {"cursor": "2000-01-01T00:00:00Z", "updated": True}
    root = write_project(
        tmp_path / "p",
        {"t": table},
        [
            {"name": "as_json", "tables": ["s.t"], "sink": "json", "options": start},
            {"name": "as_parquet", "tables": ["s.t"], "sink": "parquet", "options": {**start, "format": "parquet"}},
            {"name": "queried", "query": "queried.sql", "sink": "queried", "options": start},
        ],
        [file_sink("json"), file_sink("parquet"), file_sink("queried")],
        files={"feeds/queried.sql": "SELECT id, v AS payload, v IS NULL AS missing FROM s.t WHERE id < 1000"},
    )
    results = run(root)
    assert {f: r.status for f, r in results.items()} == dict.fromkeys(results, "running"), {
        f: r.error for f, r in results.items()
    }
    emitted = sorted(_messages(root, "json"), key=lambda m: m["updated"])
    oracle = written["oracle"]
    first, last = {}, {}
    for m in emitted:
        first.setdefault(m["key"][0], m["after"])
        last[m["key"][0]] = m["after"]
    # Version 0's rows and version 1's shredded rows as inserted; the newest after version 2's changes.
    assert {k: a["v"] for k, a in first.items()} == {
        **{i: _value(j) for i, j in oracle.items()},
        **{i + 1000: _value(j) for i, j in oracle.items()},
    }
    assert {k: a["v"] for k, a in last.items() if a is not None} == {
        i: None if j is None else _value(j) for i, j in _expected(written).items()
    }
    queried = {}  # each key's first message; a query's envelope is bare
    for m in sorted(_messages(root, "queried"), key=lambda m: m["__crdb__"]["updated"]):
        queried.setdefault(m["__crdb__"]["key"][0], m)
    assert {k: m["payload"] for k, m in queried.items() if k < 1000} == {i: _value(j) for i, j in oracle.items()}
    assert queried[0]["missing"] is False

    import pyarrow.parquet as pq

    files = sorted((root / "target" / "sink" / "parquet").rglob("*.parquet"))
    texts = {r["id"]: r["v"] for f in files for r in pq.read_table(f).to_pylist() if r.get("id", 0) >= 1000}
    assert texts == {i + 1000: j for i, j in oracle.items()}
    assert_verified(root, "as_json", "as_parquet")
