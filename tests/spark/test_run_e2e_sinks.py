"""`feedctl run` end to end: what lands in a cloud-storage sink for every envelope, message option and sink
option, and how each column type is written. One table, one feed per shape, two runs (scan, then changes).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from support import Cli
from support.e2e import (
    HLC,
    TS33,
    Table,
    assert_verified,
    file_sink,
    hlc,
    messages,
    read_sink,
    run,
    sink_dir,
    ts33_hlc,
    write_project,
)

COLUMNS = {
    "id": "int64",
    "name": "string",
    "price": "decimal",
    "at": "timestamp",
    "blob": "binary",
    "day": "date",
    "ok": "bool",
    "f": "float64",
}
UTC = timezone.utc
ROWS = [
    {
        "id": 1,
        "name": "a",
        "price": Decimal("1234567890123456.78"),
        "at": datetime(2026, 1, 2, 3, 4, 5, 123456, UTC),
        "blob": b"\x00\xffhi",
        "day": date(2026, 1, 2),
        "ok": True,
        "f": 1.5,
    },
    {
        "id": 2,
        "name": None,
        "price": Decimal("0.10"),
        "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "blob": None,
        "day": None,
        "ok": None,
        "f": None,
    },
    {
        "id": 3,
        "name": "c",
        "price": Decimal("-5.00"),
        "at": datetime(1999, 12, 31, 23, 59, 59, 120000, UTC),
        "blob": b"",
        "day": date(1999, 12, 31),
        "ok": False,
        "f": -0.25,
    },
] + [
    {
        "id": i,
        "name": f"n{i}",
        "price": Decimal(i),
        "at": datetime(2026, 5, 1, tzinfo=UTC),
        "blob": b"x",
        "day": date(2026, 5, 1),
        "ok": True,
        "f": float(i),
    }
    for i in range(4, 13)
]
# What a user reads for the first three rows.
JSON_ROWS = {
    1: {
        "id": 1,
        "name": "a",
        "price": "1234567890123456.78",
        "at": "2026-01-02T03:04:05.123456Z",
        "blob": "AP9oaQ==",
        "day": "2026-01-02",
        "ok": True,
        "f": 1.5,
    },
    2: {
        "id": 2,
        "name": None,
        "price": "0.10",
        "at": "2026-01-02T03:04:05Z",
        "blob": None,
        "day": None,
        "ok": None,
        "f": None,
    },
    3: {
        "id": 3,
        "name": "c",
        "price": "-5.00",
        "at": "1999-12-31T23:59:59.120Z",
        "blob": "",
        "day": "1999-12-31",
        "ok": False,
        "f": -0.25,
    },
}
DATA_FILE = re.compile(
    r"^(?P<ts>[0-9]{33})-[0-9a-f]{16}-(?P<batch>[0-9]+)-(?P<span>[0-9]+)-(?P<seq>[0-9a-f]{8})-"
    r"(?P<topic>[a-z_.]+)-[0-9a-f]+\.ndjson(?P<ext>\.gz|\.zst)?$"
)
FEEDS = {  # feed: (options, sink options)
    "wrapped": ({}, {}),
    "bare": (
        {"envelope": "bare", "updated": True, "resolved": True, "min_checkpoint_frequency": "0s"},
        {"partition_format": "flat"},
    ),
    "meta": (
        {"updated": True, "diff": True, "mvcc_timestamp": True, "topic_in_value": True, "full_table_name": True},
        {"partition_format": "hourly"},
    ),
    "roll": ({"updated": True}, {"file_size": "300B"}),
    "gz": ({}, {"compression": "gzip", "partition_format": "flat"}),
    "zst": ({}, {"compression": "zstd", "topic_prefix": "p_"}),
}


@pytest.fixture(scope="module")
def sinks(tmp_path_factory):
    """Every feed's sink after an initial scan and one commit of each kind (update, delete, insert)."""
    tmp = tmp_path_factory.mktemp("sinks")
    t = Table(tmp / "data" / "t", COLUMNS, ["id"], ROWS)
    root = write_project(
        tmp / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [
            {"name": name, "tables": ["s.t"], "sink": name, **({"options": o} if o else {})}
            for name, (o, _) in FEEDS.items()
        ],
        [file_sink(name, **s) for name, (_, s) in FEEDS.items()],
    )
    reports = run(root)
    assert all(r.status == "running" and r.messages == len(ROWS) for r in reports.values()), reports
    versions = [
        t.update("id = 1", price="price + 1"),
        t.delete("id = 2"),
        t.append([{**ROWS[2], "id": 13, "name": None}]),
    ]
    reports = run(root)
    assert all(r.messages == 3 for r in reports.values()), reports
    return root, t, versions


def test_wrapped_is_the_default_with_the_key_in_the_value(sinks):
    root, _, _ = sinks
    out = messages(root, "wrapped")
    assert all(set(m) == {"after", "key"} for m in out)  # key_in_value is always on for cloud storage
    assert len(out) == len(ROWS) + 3
    scan = {m["key"][0]: m["after"] for m in out[: len(ROWS)]} | {
        m["key"][0]: m["after"] for m in out[len(ROWS) :] if m["key"][0] > 12
    }
    for i, row in JSON_ROWS.items():
        assert scan[i] == row
    assert scan[13] == {**JSON_ROWS[3], "id": 13, "name": None}
    changes = sorted((m["key"], m["after"]) for m in out[len(ROWS) :])
    assert changes[0] == ([1], {**JSON_ROWS[1], "price": "1234567890123457.78"})  # every digit kept
    assert changes[1] == ([2], None)  # a delete


def test_bare_puts_metadata_under_crdb(sinks):
    root, _, _ = sinks
    out = messages(root, "bare")
    for m in out:
        assert set(m["__crdb__"]) == {"key", "updated"} and HLC.match(m["__crdb__"]["updated"])
    rows = {m["__crdb__"]["key"][0]: m for m in out}
    assert {k: v for k, v in rows[3].items() if k != "__crdb__"} == JSON_ROWS[3]
    assert set(rows[2]) == {"__crdb__"}  # the delete: the key, no columns
    files = read_sink(sink_dir(root, "bare"))
    assert all("/" not in f.name for f in files)  # flat
    resolved = [f for f in files if f.resolved]  # in bare, the resolved timestamp is metadata too
    assert resolved and all(
        f.lines == [{"__crdb__": {"resolved": f.lines[0]["__crdb__"]["resolved"]}}]
        and hlc(f.lines[0]["__crdb__"]["resolved"]) == ts33_hlc(f.ts33)
        for f in resolved
    )


def test_updated_diff_mvcc_topic_and_full_table_name(sinks):
    root, t, versions = sinks
    files = read_sink(sink_dir(root, "meta"))
    out = [m for f in files for m in f.lines]
    for m in out:
        assert set(m) == {"after", "before", "key", "mvcc_timestamp", "topic", "updated"}
        assert m["topic"] == "s.t"
        assert hlc(m["mvcc_timestamp"]) <= hlc(m["updated"]) and m["mvcc_timestamp"].endswith(".0000000000")
    scan, changes = out[: len(ROWS)], out[len(ROWS) :]
    assert all(m["before"] is None and hlc(m["mvcc_timestamp"])[0] == t.commit_ns(0) for m in scan)
    by_key = {m["key"][0]: m for m in changes}
    assert by_key[1]["before"] == JSON_ROWS[1] and by_key[1]["after"]["price"] == "1234567890123457.78"
    assert by_key[2]["before"] == JSON_ROWS[2] and by_key[2]["after"] is None
    assert by_key[13]["before"] is None
    for key, version in zip((1, 2, 13), versions):
        assert hlc(by_key[key]["mvcc_timestamp"])[0] == t.commit_ns(version)
    for f in files:  # hourly folders, named after the file's own timestamp; the topic in the name
        assert f.name == f"{f.ts33[:4]}-{f.ts33[4:6]}-{f.ts33[6:8]}/{f.ts33[8:10]}/{f.base}"
        assert DATA_FILE.match(f.base)["topic"] == "s.t"


def test_file_size_rolls_files_in_increasing_names(sinks):
    root, _, _ = sinks
    files = read_sink(sink_dir(root, "roll"))
    spans: dict[tuple, list] = {}
    for f in files:
        assert f.name == f"{f.ts33[:4]}-{f.ts33[4:6]}-{f.ts33[6:8]}/{f.base}"  # daily
        parts = DATA_FILE.match(f.base)
        spans.setdefault((parts["batch"], parts["span"]), []).append((int(parts["seq"], 16), f))
        assert all(ts33_hlc(f.ts33) <= hlc(m["updated"]) for m in f.lines if "updated" in m)
        sizes = [len(line) + 1 for line in f.text.encode().splitlines()]
        assert sum(sizes[:-1]) < 300  # the message that reaches file_size closes the file
    # both spans hold files, and files roll (the scan's single row group is read by one span's task)
    assert {span for _, span in spans} == {"0", "1"} and any(len(v) > 1 for v in spans.values())
    for numbered in spans.values():
        assert [seq for seq, _ in numbered] == list(range(len(numbered)))  # listing order = writing order
        assert all(len(f.raw) >= 300 for _, f in numbered[:-1])
    assert sorted(m["key"] for m in messages(root, "roll")) == sorted(m["key"] for m in messages(root, "wrapped"))


def test_compressed_files_hold_the_same_lines(sinks):
    root, _, _ = sinks
    plain = sorted(line for f in read_sink(sink_dir(root, "wrapped")) for line in f.text.splitlines())
    assert len(plain) == len(ROWS) + 3
    for sink, ext, magic in (("gz", ".gz", b"\x1f\x8b"), ("zst", ".zst", b"\x28\xb5\x2f\xfd")):
        files = read_sink(sink_dir(root, sink))
        assert files and all(f.name.endswith(".ndjson" + ext) and f.raw.startswith(magic) for f in files)
        assert sorted(line for f in files for line in f.text.splitlines()) == plain


def test_data_files_are_named_and_partitioned_and_no_resolved_without_the_option(sinks):
    root, _, _ = sinks
    for sink in FEEDS:
        files = [f for f in read_sink(sink_dir(root, sink)) if sink != "bare" or not f.resolved]
        assert files and not any(f.resolved for f in files)  # only `bare` asks for resolved timestamps
        for f in files:
            parts = DATA_FILE.match(f.base)
            assert parts and TS33.match(parts["ts"]), f.name
            assert parts["topic"] == {"meta": "s.t", "zst": "p_t"}.get(sink, "t")
        assert [f.name for f in files] == sorted(f.name for f in files)


def test_verify_passes_on_every_feed_with_timestamps(sinks):
    root, _, _ = sinks
    assert_verified(root, "bare", "meta", "roll")  # flat, hourly and daily folders; a scan, then changes
    refused = Cli(root)("verify", "wrapped")
    assert refused.exit_code == 2 and "does not set `updated: true`" in refused.output


def test_a_null_sink_takes_every_message_and_keeps_none(tmp_path):
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], ROWS)
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [
            {
                "name": "nowhere",
                "tables": ["s.t"],
                "sink": "null",
                "options": {"resolved": True, "min_checkpoint_frequency": "0s"},
            }
        ],
        [{"name": "null", "uri": "null://"}],
    )
    first = run(root)["nowhere"]
    assert first.status == "running" and first.messages == len(ROWS) and first.files == 0, first
    t.delete("id > 10")
    second = run(root)["nowhere"]
    assert second.messages == 2 and second.resolved == second.high_water > first.high_water, second
    assert not (root / "target" / "sink").exists()
