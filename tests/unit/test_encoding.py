"""The JSON encoder on its own: every envelope and option, on one frame of changes (no Spark)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import polars as pl
import pyarrow as pa

from feedctl import frame
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.json import encode_values, resolved_message

ROW = pa.struct(
    [
        ("name", pa.string()),
        ("id", pa.int64()),
        ("amount", pa.decimal128(10, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("blob", pa.binary()),
        ("score", pa.float64()),
    ]
)


def _frame() -> pl.DataFrame:
    at = datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=timezone.utc)
    after = pa.array(
        [
            {"name": 'a"b', "id": 1, "amount": Decimal("12.50"), "at": at, "blob": b"\x00\xff", "score": float("nan")},
            None,
        ],
        ROW,
    )
    before = pa.array(
        [None, {"name": "z", "id": 2, "amount": Decimal("-0.01"), "at": None, "blob": None, "score": 1.5}], ROW
    )
    return pl.from_arrow(
        pa.table(
            {
                frame.AFTER: after,
                frame.BEFORE: before,
                frame.KEY: pa.array([{"city": "nyc", "id": 1}, {"city": "ams", "id": 2}]),
                frame.TOPIC: ["rides", "rides"],
                frame.TS_WALL: [1632241564629087669, 5],
                frame.TS_LOGICAL: pa.array([0, 3], pa.int32()),
                frame.MVCC_WALL: [1632241564000000000, 4],
            }
        )
    )


def _decode(spec: Envelope) -> list:
    return [json.loads(v) for v in encode_values(_frame(), spec).to_list()]


def test_wrapped_with_every_option_and_the_type_mapping():
    insert, delete = _decode(
        Envelope(diff=True, updated=True, mvcc_timestamp=True, key_in_value=True, topic_in_value=True)
    )
    assert insert == {
        "after": {
            "amount": "12.50",
            "at": "2026-01-02T03:04:05.120Z",
            "blob": "AP8=",
            "id": 1,
            "name": 'a"b',
            "score": None,
        },
        "before": None,
        "key": ["nyc", 1],
        "mvcc_timestamp": "1632241564000000000.0000000000",
        "topic": "rides",
        "updated": "1632241564629087669.0000000000",
    }
    assert delete["after"] is None and delete["before"]["amount"] == "-0.01"
    assert delete["updated"] == "5.0000000003"
    assert list(insert) == sorted(insert) and list(insert["after"]) == sorted(insert["after"])


def test_default_wrapped_has_only_after():
    assert _decode(Envelope()) == [
        {
            "after": {
                "amount": "12.50",
                "at": "2026-01-02T03:04:05.120Z",
                "blob": "AP8=",
                "id": 1,
                "name": 'a"b',
                "score": None,
            }
        },
        {"after": None},
    ]


def test_bare_puts_metadata_under_crdb():
    insert, delete = _decode(Envelope("bare", updated=True))
    assert insert["__crdb__"] == {"key": ["nyc", 1], "updated": "1632241564629087669.0000000000"}
    assert insert["id"] == 1 and "after" not in insert
    assert delete == {"__crdb__": {"key": ["ams", 2], "updated": "5.0000000003"}}


def test_key_only_and_row():
    assert _decode(Envelope("key_only")) == [["nyc", 1], ["ams", 2]]
    insert, delete = _decode(Envelope("row"))
    assert insert["amount"] == "12.50" and "after" not in insert and delete is None


def test_resolved_messages():
    assert json.loads(resolved_message("5.0000000000", "wrapped")) == {"resolved": "5.0000000000"}
    assert json.loads(resolved_message("5.0000000000", "bare")) == {"__crdb__": {"resolved": "5.0000000000"}}


def test_message_keys_are_the_json_array_of_the_primary_key():
    from feedctl.encoding.json import key_json

    keys = [(1, "nyc", 2.5), (-7, 'a"b\\c\n\x01é😀', None), (None, None, 0.0), (2**62, "", -1e300)]
    df = pl.DataFrame(
        {frame.KEY: [{"id": i, "city": c, "x": x} for i, c, x in keys]},
        schema={frame.KEY: pl.Struct({"id": pl.Int64, "city": pl.String, "x": pl.Float64})},
    )
    texts = df.select(key_json(df)).to_series().to_list()
    assert [json.loads(t) for t in texts] == [list(k) for k in keys]
    plain = df.filter(pl.col(frame.KEY).struct.field("id") == 1)  # a string needing no escape: written as is
    assert plain.select(key_json(plain)).item() == '[1,"nyc",2.5]'
