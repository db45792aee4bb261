"""verify's second reader of deletion vectors (`verify/deleted_rows.py`), written apart from the reader's: its
Roaring decoding against bitmaps CRoaring (pyroaring) serialized, its whole reading against delta-rs's on
every version of every deletion-vector table of the corpus, and a table delta-rs refuses over
`vacuumProtocolCheck` read as delta-kernel-rs (polars-deltalake) reads it."""

from __future__ import annotations

import json
import struct
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.fs as pa_fs
import pytest
from deltalake import DeltaTable

from feedctl.verify import deleted_rows
from feedctl.verify.second_reader import SecondReader
from support.corpus import copy, require
from support.deletion_vectors import bitmap, z85

DV_TABLES = [
    "golden__dv-partitioned-with-checkpoint",
    "golden__dv-with-columnmapping",
    "golden__log-replay-dv-key-cases",
    "rs__cdf-table-with-cdc-and-dvs",
    "rs__table_with_deletion_logs",
]


def test_z85_is_read_as_its_specification_example():
    assert deleted_rows.z85("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])


@pytest.mark.parametrize(
    "values",
    [
        [0, 3, 70_000],  # array containers
        list(range(0, 20_000, 3)),  # a bitmap container (over 4096 values under one key)
        list(range(100, 90_000)) + [1 << 33, (1 << 33) + 5],  # runs, once optimized, and a second 32-bit bitmap
        [],
    ],
    ids=["arrays", "bitmap", "runs-and-high-keys", "empty"],
)
def test_roaring_bitmaps_of_every_container_kind_are_read_as_croaring_wrote_them(values):
    data = bitmap(*values, runs=True)
    inline = {"storageType": "i", "sizeInBytes": len(data), "pathOrInlineDv": z85(data)}
    assert deleted_rows.rows(None, inline) == set(values)


@pytest.mark.parametrize("name", DV_TABLES)
def test_the_rows_deletion_vectors_delete_are_those_delta_rs_reads_at_every_version(name):
    path = str(require() / name)
    files = pa_fs.SubTreeFileSystem(path, pa_fs.LocalFileSystem())
    checked = 0
    for version in range(DeltaTable(path).version() + 1):
        try:
            table = DeltaTable(path, version=version)
        except Exception:  # a version whose commit the corpus no longer holds (a checkpoint replaced it)
            continue
        vectors = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all()
        theirs = {
            unquote(uri).removeprefix("file://").removeprefix(path + "/"): {i for i, k in enumerate(keep) if not k}
            for uri, keep in zip(vectors["filepath"].to_pylist(), vectors["selection_vector"].to_pylist())
        }
        mine = deleted_rows.deleted(files, version, None)
        assert {p: r for p, r in mine.items() if r} == {p: r for p, r in theirs.items() if r}, version
        checked += bool(mine)
    assert checked, "the table has deletion vectors"


def test_a_table_delta_rs_refuses_over_vacuum_protocol_check_is_read_as_delta_kernel_reads_it(tmp_path):
    import polars_deltalake

    path = copy("golden__dv-partitioned-with-checkpoint", tmp_path)
    version = DeltaTable(str(path)).version() + 1
    (path / "_delta_log" / f"{version:020d}.json").write_text(
        "\n".join(
            json.dumps(a)
            for a in [
                {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "SET TBLPROPERTIES"}},
                {
                    "protocol": {
                        "minReaderVersion": 3,
                        "minWriterVersion": 7,
                        "readerFeatures": ["deletionVectors", "vacuumProtocolCheck"],
                        "writerFeatures": ["deletionVectors", "vacuumProtocolCheck"],
                    }
                },
            ]
        )
        + "\n"
    )
    with pytest.raises(Exception, match="VacuumProtocolCheck"):
        pa.RecordBatchReader.from_stream(DeltaTable(str(path)).deletion_vectors()).read_all()

    ours = SecondReader("t", str(path), None).rows(version)
    kernel = polars_deltalake.scan_delta(str(path), version=version).collect()
    assert sorted(ours.to_pylist(), key=lambda r: r["col1"]) == kernel.sort("col1").to_dicts()
    stored = pa.table(DeltaTable(str(path), version=version - 1).get_add_actions(flatten=True))["num_records"]
    assert ours.num_rows < pa.compute.sum(stored).as_py(), "the files' rows, less those deleted"


def test_a_vector_stored_by_its_absolute_uri_is_read_where_it_names_outside_the_table(tmp_path):
    """Storage type `p`: a percent-encoded URI (Spark's `file:/...`, one slash), here outside the table."""
    data = bitmap(2, 7)
    folder = tmp_path / "folder&with%special char"
    folder.mkdir()
    (folder / "dv.bin").write_bytes(b"\x01" + struct.pack(">i", len(data)) + data + b"\0\0\0\0")
    (tmp_path / "t").mkdir()
    reader = SecondReader("t", str(tmp_path / "t"), None)
    uri = "file:" + quote(str(folder / "dv.bin"), safe="/&")
    assert "%25" in uri and "%20" in uri and "&" in uri
    vector = {"storageType": "p", "pathOrInlineDv": uri, "offset": 1, "sizeInBytes": len(data)}
    assert deleted_rows.rows(reader._filesystem(), vector, reader._absolute) == {2, 7}
