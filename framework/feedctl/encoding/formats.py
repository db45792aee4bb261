"""The look-up of a feed's `format`: one encoder per format, each turning a frame of messages into what a
file takes of each message (with its size, by which files are cut) and a file of such pieces."""

from __future__ import annotations

from typing import Protocol

from feedctl.encoding.avro import AvroEncoder
from feedctl.encoding.csv import CsvEncoder
from feedctl.encoding.envelope import Envelope
from feedctl.encoding.json import JsonEncoder
from feedctl.encoding.parquet import ParquetEncoder


class Encoder(Protocol):
    def encode(self, df): ...  # (pieces with .slice(start, length), each message's size in bytes)

    def file(self, parts: list) -> bytes: ...


ENCODERS = {"json": JsonEncoder, "parquet": ParquetEncoder, "avro": AvroEncoder, "csv": CsvEncoder}


def encoder(fmt: str, envelope: Envelope, topic: str, compression: str | None) -> Encoder:
    return ENCODERS[fmt](envelope, topic, compression)
