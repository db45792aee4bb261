"""What the reader refuses, on tables whose log is written here as a writer would write it: a value that does
not fit the version's type is an error naming table, version and column (never another value), and a table
asking for a reader feature feedctl does not read is refused by name at compile, at debug and at run."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake

from feedctl.source.delta import DeltaSource, SourceError
from support import Cli
from support.cli import checks_of, diagnostics
from support.deletion_vectors import z85


def _commit(path, version: int, *actions: dict) -> None:
    commit = [{"commitInfo": {"timestamp": 1795537907200, "operation": "SET TBLPROPERTIES"}}, *actions]
    (path / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in commit))


def _metadata(path) -> dict:
    first = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    return next(json.loads(line)["metaData"] for line in first if "metaData" in line)


def test_a_value_that_does_not_fit_its_type_is_an_error_naming_table_version_and_column(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int32()), "n": pa.array([2**40], pa.int64())}))
    metadata = _metadata(path)
    schema = json.loads(metadata["schemaString"])
    schema["fields"][1]["type"] = "integer"  # a log that says narrower than the file holds
    _commit(path, 1, {"metaData": {**metadata, "schemaString": json.dumps(schema)}})
    with pytest.raises(SourceError, match=r"table s\.t: cannot read version 1: column n: values of type int64"):
        DeltaSource("s.t", str(path)).snapshot(1).read_all()


def _with_protocol(tmp_path, reader_version: int, features: list[str]):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    protocol = {"minReaderVersion": reader_version, "minWriterVersion": 7}
    if features:
        protocol.update(readerFeatures=features, writerFeatures=[*features, "changeDataFeed"])
    _commit(path, 1, {"protocol": protocol})
    return path


# What a table may ask of its readers that feedctl does not read, and the words it refuses it in: delta-rs
# refuses to open all but the first with its own ("Feature 'geospatial' is not supported", "Invalid protocol
# action"), which must not reach users as an outage to retry.
REFUSED = [
    (3, ["geospatial"], r"needs the table feature geospatial, which feedctl does not read \(geospatial: GEOMETRY"),
    (3, ["columnMapping", "someFutureThing"], r"needs the table feature someFutureThing, which feedctl does not read$"),
    (4, [], r"needs a reader of protocol version 4; feedctl reads versions 1 to 3"),
]


@pytest.mark.parametrize("reader_version, features, words", REFUSED, ids=["geospatial", "unknown", "v4"])
def test_a_table_asking_for_what_feedctl_does_not_read_is_refused_by_name(tmp_path, reader_version, features, words):
    """At run (the source opening it), at compile (FC524, an error at the table's line) and at debug."""
    path = _with_protocol(tmp_path, reader_version, features)
    with pytest.raises(SourceError, match=f"^table s.t (at version 1 )?{words}"):
        DeltaSource("s.t", str(path)).check_readable(0)
    project = _project(tmp_path, path)
    compiled = Cli(project)("compile", json_logs=True)
    assert compiled.exit_code == 1
    errors = [d for d in diagnostics(compiled) if d["severity"] == "error"]
    assert [(d["code"], d["file"], d["line"]) for d in errors] == [("FC524", "project.yml", 6)]
    assert re.search(words.removesuffix("$"), errors[0]["message"]), errors[0]["message"]
    check = checks_of(Cli(project)("debug", json_logs=True))["table s.t"]
    assert not check["ok"] and re.search(words.removesuffix("$"), check["detail"]), check["detail"]
    assert "Kernel error" not in check["detail"] + errors[0]["message"]


def _project(tmp_path, table, **feed) -> object:
    """A project over the table `s.t` at `table`, with one feed `f` following it (`feed`: its options)."""
    project = tmp_path / "p"
    (project / "feeds").mkdir(parents=True)
    (project / "project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "config-version": 1,
                "sources": [{"name": "s", "tables": [{"name": "t", "path": str(table), "primary_key": ["id"]}]}],
            }
        )
    )
    (project / "feeds" / "f.yml").write_text(yaml.safe_dump({"feeds": [{"name": "f", "tables": ["s.t"], **feed}]}))
    return project


def test_a_remove_without_its_partition_values_is_read_as_deletes_under_a_partition_condition(tmp_path):
    """Writers may leave partition values out of a `remove` (they are optional there): the file's partition
    is then found in the version before, so a condition on it neither skips nor misplaces the deletes."""
    path = tmp_path / "t"
    write_deltalake(
        str(path),
        pa.table({"id": [1, 2, 3], "region": ["eu", "eu", "us"]}),
        partition_by=["region"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    first = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    eu = next(json.loads(line)["add"] for line in first if '"add"' in line and "region=eu" in line)
    _commit(path, 1, {"remove": {"path": eu["path"], "deletionTimestamp": 1795537907200, "dataChange": True}})
    source = DeltaSource("s.t", str(path))
    changes = source.changes(0, 1, ["id", "region"], "`region` = 'eu'").read_all()
    assert sorted(
        zip(changes["id"].to_pylist(), changes["region"].to_pylist(), changes["_change_type"].to_pylist())
    ) == [(1, "eu", "delete"), (2, "eu", "delete")]
    assert source.changes(0, 1, ["id"], "`region` = 'us'").read_all().num_rows == 0


@pytest.mark.parametrize(
    "inline, words",
    [
        ("#####", "Z85 block '#####' decodes past 2\\^32"),  # 85^5 - 1 > 2^32 - 1
        (z85(b"\0\0\0\0not a bitmap"), "its magic number is wrong"),
    ],
    ids=["z85-overflow", "not-a-bitmap"],
)
def test_a_malformed_deletion_vector_fails_naming_table_version_and_file(tmp_path, inline, words):
    """A vector that cannot be what the protocol says is no outage: an error at once (a `SourceError`, which
    no retry repeats), naming the table, the version and the data file."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))
    first = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    add = next(json.loads(line)["add"] for line in first if '"add"' in line)
    vector = {"storageType": "i", "pathOrInlineDv": inline, "sizeInBytes": 4, "cardinality": 1}
    _commit(
        path,
        1,
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
    )
    _commit(
        path,
        2,
        {"remove": {"path": add["path"], "deletionTimestamp": 1795537907200, "dataChange": True}},
        {"add": {**add, "deletionVector": vector, "dataChange": True}},
    )
    source = DeltaSource("s.t", str(path))
    with pytest.raises(SourceError, match=f"table s.t: .*version 2: the deletion vector of {add['path']}: .*{words}"):
        source.changes(1, 2).read_all()
    with pytest.raises(SourceError, match=f"table s.t: cannot read version 2: the deletion vector of .*{words}"):
        source.snapshot(2).read_all()


def test_debug_reads_the_changes_a_feed_would_read_from_its_cursor(tmp_path):
    """A version a feed's cursor reaches back to is read by `debug` as the job would read it: a malformed
    deletion vector two versions before the newest fails the check of a feed starting before it, naming the
    version, and not of a feed starting from the newest."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))
    first = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    add = next(json.loads(line)["add"] for line in first if '"add"' in line)
    vector = {"storageType": "i", "pathOrInlineDv": "#####", "sizeInBytes": 4, "cardinality": 1}
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
    protocol.update(readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"])
    _commit(path, 1, {"protocol": protocol})
    _commit(
        path,
        2,
        {"remove": {"path": add["path"], "deletionTimestamp": 1795537907200, "dataChange": True}},
        {"add": {**add, "deletionVector": vector, "dataChange": True}},
    )
    gone = {"path": add["path"], "deletionVector": vector, "deletionTimestamp": 1795537907200, "dataChange": True}
    _commit(path, 3, {"remove": gone})  # a file is named by its path and its vector
    write_deltalake(str(path), pa.table({"id": [4]}), mode="append")  # version 4, the newest

    check = checks_of(Cli(_project(tmp_path / "newest", path))("debug", json_logs=True))["table s.t"]
    assert check["ok"], check
    result = Cli(_project(tmp_path / "back", path, options={"cursor": "version:1"}))("debug", json_logs=True)
    assert result.exit_code == 1
    check = checks_of(result)["table s.t"]
    assert not check["ok"] and "the changes of version 2" in check["detail"], check
    assert "decodes past 2^32" in check["detail"], check


def test_debug_fails_a_feed_whose_cursor_reaches_versions_without_its_key(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"n": [1]}))
    write_deltalake(str(path), pa.table({"n": [2]}), mode="append")
    write_deltalake(str(path), pa.table({"n": [3], "id": [7]}), mode="append", schema_mode="merge")
    check = checks_of(Cli(_project(tmp_path / "newest", path))("debug", json_logs=True))["table s.t"]
    assert check["ok"], check
    check = checks_of(Cli(_project(tmp_path / "back", path, options={"cursor": "version:0"}))("debug", json_logs=True))
    assert not check["table s.t"]["ok"]
    assert check["table s.t"]["detail"] == "version 1 has no primary key column id", check
