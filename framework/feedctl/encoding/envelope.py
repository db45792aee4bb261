"""What a message holds besides the row: the feed's envelope and the fields it asks for. It shapes every
format, not JSON alone (Parquet's `__crdb__` columns and Avro's record fields follow it too)."""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.options import Options


@dataclass(frozen=True)
class Envelope:
    kind: str = "wrapped"  # wrapped | bare | key_only | row
    diff: bool = False
    updated: bool = False
    mvcc_timestamp: bool = False
    key_in_value: bool = False
    topic_in_value: bool = False
    json_columns: tuple[str, ...] = ()  # the row's columns holding JSON text (VARIANTs): written as JSON

    @staticmethod
    def from_options(options: Options) -> "Envelope":
        return Envelope(
            options.envelope,
            options.diff,
            options.updated,
            options.mvcc_timestamp,
            options.key_in_value,
            options.topic_in_value,
        )
