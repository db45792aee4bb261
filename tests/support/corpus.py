"""The real Delta tables of `../shared/delta-tables/` (written by Spark, Databricks and delta-rs for those
projects' own tests; its README lists each one's origin and features), as the tests use them.

Tests read them from there, and copy a table to a temporary folder before anything could write to it; where
the folder is absent, they skip saying so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.projects import REPO

CORPUS = REPO.parent / "shared" / "delta-tables"

# A primary key for each table: a column unique in every version, else the columns that together are. Found
# by reading the tables, and checked by `test_delta_corpus.py` (the key of a change data table is a key in
# every version of its history).
KEYS = {
    "golden__basic-decimal-table": ["part"],
    "golden__basic-with-inserts-deletes-checkpoint": ["id"],
    "golden__basic-with-inserts-updates": ["id"],
    "golden__basic-with-vacuum-protocol-check-feature": ["id"],
    "golden__commit-info-containing-arbitrary-operationParams-types": ["id"],
    "golden__data-reader-array-complex-objects": ["i"],
    "golden__data-reader-map": ["i"],
    "golden__data-reader-nested-struct": ["b"],
    "golden__data-reader-partition-values": ["value"],
    "golden__data-reader-primitives": [
        "as_int",
        "as_long",
        "as_byte",
        "as_short",
        "as_boolean",
        "as_string",
        "as_big_decimal",
    ],
    "golden__data-reader-timestamp_ntz": ["id"],
    "golden__decimal-various-scale-precision": ["decimal_4_0", "decimal_38_36"],
    "golden__dv-partitioned-with-checkpoint": ["col1"],
    "golden__dv-with-columnmapping": ["col1"],
    "golden__kernel-timestamp-INT96": ["id"],
    "golden__log-replay-dv-key-cases": ["id"],
    "golden__multi-part-checkpoint": ["id"],
    "golden__parquet-all-types": ["ByteType", "ShortType", "IntegerType", "LongType", "StringType"],
    "golden__table-with-columnmapping-mode-id": ["ByteType", "ShortType", "IntegerType", "LongType", "StringType"],
    "golden__table-with-columnmapping-mode-name": ["ByteType", "ShortType", "IntegerType", "LongType", "StringType"],
    "golden__time-travel-schema-changes-b": ["id"],
    "golden__type-widening": ["byte_long"],
    "golden__type-widening-nested": ["struct"],
    "golden__v2-checkpoint-json": ["id"],
    "golden__v2-checkpoint-parquet": ["id"],
    "handedited__edge-timestamps-cdf": ["SOME_VALUE"],
    "handedited__edge-timestamps-cdf-plus-append": ["SOME_VALUE"],
    "handedited__escaped-chars-cdf": ["_1"],
    "handedited__timestamp_ntz-cdf": ["id"],
    "handedited__vacuum-check-cdf": ["id"],
    "rs__cdc_ict_table": ["name"],
    "rs__cdf-table": ["id"],
    "rs__cdf-table-non-partitioned": ["name"],
    "rs__cdf-table-with-cdc-and-dvs": ["id"],
    "rs__checkpoint-cdf-table": ["id"],
    "rs__checkpoint-v2-table": ["id"],
    "rs__delta-live-table": ["sherpa_user_id"],
    "rs__simple_table_with_cdc": ["id"],
    "rs__table-with-domain-metadata": ["id"],
    "rs__table_with_column_mapping": ["Super Name"],
    "rs__table_with_deletion_logs": ["address"],
    "rs__table_with_edge_timestamps": ["SOME_VALUE"],
    "rs__table_with_liquid_clustering": ["id"],
}

# Tables whose changes can be followed: the change data feed is on from the version given (a cursor before
# it is refused; the hand-edited table turned it on in its third commit).
CHANGE_DATA_FROM = {
    "golden__commit-info-containing-arbitrary-operationParams-types": 0,
    "handedited__edge-timestamps-cdf": 0,
    "handedited__edge-timestamps-cdf-plus-append": 0,
    "handedited__escaped-chars-cdf": 0,
    "handedited__timestamp_ntz-cdf": 0,
    "handedited__vacuum-check-cdf": 2,
    "rs__cdc_ict_table": 0,
    "rs__cdf-table": 0,
    "rs__cdf-table-non-partitioned": 0,
    "rs__cdf-table-with-cdc-and-dvs": 0,
    "rs__simple_table_with_cdc": 0,
}

# Tables no set of columns is a key of (two rows alike): read, but not followed as a changefeed's source.
NO_KEY = ("golden__multi-part-checkpoint",)

# Tables whose log names a data file the corpus does not hold: reading them must fail, naming what is gone.
INCOMPLETE = ("rs__table-with-domain-metadata",)


def ident(name: str) -> str:
    """The table's name in a project (`c.<ident>`): lower case, `-` as `_`."""
    return name.lower().replace("-", "_")


def tables() -> list[str]:
    """Every table of the corpus, or none (the tests of each then skip) where the folder is absent."""
    return sorted(KEYS)


def require() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the Delta table corpus is not at {CORPUS}")
    return CORPUS


def copy(name: str, into: Path) -> Path:
    """A copy of a corpus table to read or write."""
    target = into / name
    if not target.exists():
        shutil.copytree(require() / name, target)
    return target


# A folder name a URI must escape: a space and `%` are percent-encoded, `&` is not.
SPECIAL_FOLDER = "folder&with%special char"


def with_absolute_deletion_vectors(name: str, into: Path) -> tuple[Path, Path]:
    """A copy of corpus table `name` whose deletion vector files are moved out of it, to a folder named
    `SPECIAL_FOLDER` beside it, and named in a copy of its log by absolute path (storage type `p`, a `file:`
    URI), as Spark writes them for shallow clones. Returns the table and the folder."""
    import json
    import uuid
    from urllib.parse import quote

    from support.deletion_vectors import z85_decode

    table = copy(name, into)
    folder = into / SPECIAL_FOLDER
    folder.mkdir()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                dv = (action.get(kind) or {}).get("deletionVector")
                if dv and dv["storageType"] == "u":
                    prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
                    file_name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
                    source = table / prefix / file_name
                    if source.exists():
                        source.rename(folder / file_name)
                    dv["storageType"], dv["pathOrInlineDv"] = "p", "file:" + quote(str(folder / file_name), safe="/&")
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")
        commit.with_suffix(".crc").unlink(missing_ok=True)
    assert list(folder.iterdir()), f"{name} has no deletion vector file"
    return table, folder


def with_renamed_column(name: str, column: str, new_name: str, into: Path) -> Path:
    """A copy of column-mapping corpus table `name` with one more commit, renaming `column` to `new_name` as
    `ALTER TABLE ... RENAME COLUMN` does: a metaData action whose schema gives the field its new logical name,
    with the same `delta.columnMapping.physicalName` and `id`."""
    import json

    from deltalake import DeltaTable

    table = copy(name, into)
    delta = DeltaTable(str(table))
    schema = json.loads(delta.schema().to_json())
    (field,) = [f for f in schema["fields"] if f["name"] == column]
    assert field["metadata"].get("delta.columnMapping.physicalName"), f"{name} has no column mapping"
    field["name"] = new_name
    metadata = delta.metadata()
    version = delta.version() + 1
    actions = [
        {"commitInfo": {"timestamp": delta.history(1)[0]["timestamp"] + 1000, "operation": "RENAME COLUMN"}},
        {
            "metaData": {
                "id": metadata.id,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": list(metadata.partition_columns),
                "configuration": dict(metadata.configuration),
                "createdTime": metadata.created_time,
            }
        },
    ]
    (table / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return table
