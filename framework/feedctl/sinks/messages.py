"""What a consumer reads from a sink, parsed: a cloud-storage sink's files in lexicographic order, each name
parsed and checked, each line of a data file parsed as a message of the feed's envelope; a Kafka sink's
partitions, each in offset order, its messages and resolved messages parsed the same way; a webhook
endpoint's capture, request after request in the order they were acknowledged. Each sink's `read` hands
its records here in its consumers' order.

Messages are reduced to what the checks compare: topic, key, event timestamp, and the `after`/`before`
objects as canonical JSON text (sorted keys, no spaces), so that equal content compares equal as text.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import polars as pl
import pyarrow.parquet as pq

from feedctl import frame
from feedctl.encoding import parquet
from feedctl.encoding.avro import read_avro
from feedctl.encoding.compression import decompress
from feedctl.encoding.json import key_json, object_json
from feedctl.sinks import naming
from feedctl.units import Hlc

# A data file or a resolved file of a cloud-storage sink, in its partition folder.
NAME = re.compile(
    r"^(?P<part>(?:[^/]+/)*)(?P<ts>[0-9]{33})"
    r"(?:(?P<resolved>\.RESOLVED)"
    r"|-(?P<job>[0-9a-f]{16})-(?P<batch>[0-9]+)-(?P<span>[0-9]+)-(?P<seq>[0-9a-f]{8})-(?P<topic>.+)-[0-9a-f]+"
    r"(?P<ext>\.[a-z]+(?:\.gz|\.zst)?))$"
)
_HLC = re.compile(r"^[0-9]+\.[0-9]{10}$")
WRAPPED_FIELDS = {"after", "before", "key", "updated", "mvcc_timestamp", "topic"}


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse_hlc(text: str) -> Hlc:
    wall, logical = text.split(".")
    return Hlc(int(wall), int(logical))


@dataclass(frozen=True)
class TableShape:
    """What a typed file (CSV, Avro) cannot say itself: the key, and the table's columns and types."""

    key: list[str]
    schema: dict  # column -> polars type, in table order


@dataclass(frozen=True)
class MessageSpec:
    """What every message of the feed must look like, from its job's options."""

    envelope: str  # wrapped | bare
    diff: bool
    updated: bool  # messages carry `updated`; without it (initial_scan: only) every message is at `start`
    start: Hlc
    extension: str  # `.ndjson`, `.ndjson.gz`, `.parquet`, ...
    partition_format: str
    format: str = "json"
    shapes: dict = field(default_factory=dict)  # topic -> TableShape
    diff_changes: tuple = ()  # (after, diff): `diff` changed in place for event timestamps above `after`

    def at(self, ts: Hlc) -> "MessageSpec":
        """The spec of messages of event timestamp `ts` (`diff` may have changed in place before it)."""
        diff = self.diff
        for after, now in self.diff_changes:
            if after is None or ts > after:
                diff = now
        return self if diff == self.diff else replace(self, diff=diff)


@dataclass(frozen=True)
class Message:
    file: str
    line: int
    topic: str
    key: str
    ts: Hlc
    after: str | None  # canonical JSON; None for a delete
    before: str | None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class DataFile:
    """A file of a cloud-storage sink; or a run of messages of a Kafka partition (`ts` None: no file)."""

    name: str
    ts: Hlc | None
    messages: list[Message] = field(default_factory=list)


@dataclass
class ResolvedFile:
    name: str
    ts: Hlc


def parse_message(
    text: str, spec: MessageSpec, message_key: str | None = None
) -> tuple[str, Hlc, str | None, str | None]:
    """(key, event timestamp, after, before) of one line; ValueError saying what is wrong with it.
    `message_key` is the key a Kafka message carries beside its value."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("not JSON") from None
    return parse_value(value, spec, message_key)


def parse_value(value, spec: MessageSpec, message_key: str | None = None) -> tuple[str, Hlc, str | None, str | None]:
    """As `parse_message`, for a message already parsed from JSON (it is modified)."""
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    if spec.envelope == "bare":
        meta = value.pop("__crdb__", None)
        if not isinstance(meta, dict):
            raise ValueError('no "__crdb__" object')
        after, before = (value or None), None
    else:
        meta = value
        unknown = set(value) - WRAPPED_FIELDS
        if unknown:
            raise ValueError(f"unexpected field {sorted(unknown)[0]!r}")
        if "after" not in value:
            raise ValueError('no "after" field')
        after, before = value["after"], value.get("before")
        for name, obj in (("after", after), ("before", before)):
            if obj is not None and not isinstance(obj, dict):
                raise ValueError(f'"{name}" is neither an object nor null')
    key = meta.get("key")
    if message_key is not None:
        try:
            carried = json.loads(message_key)
        except ValueError:
            raise ValueError(f"message key {message_key!r} is not JSON") from None
        if key is not None and key != carried:
            raise ValueError(f'"key" {canonical(key)} differs from the message key {message_key}')
        key = carried
    if not isinstance(key, list) or not key:
        raise ValueError('no "key" array')
    if spec.updated:
        updated = meta.get("updated")
        if not isinstance(updated, str) or not _HLC.match(updated):
            raise ValueError(f'"updated" is not a timestamp like "1700000000000000000.0000000000": {updated!r}')
        ts = parse_hlc(updated)
    else:
        ts = spec.start
    if spec.envelope != "bare" and spec.at(ts).diff != ("before" in meta):
        raise ValueError('"before" present without diff' if "before" in meta else 'no "before" field (diff is on)')
    return (
        canonical(key),
        ts,
        None if after is None else canonical(after),
        None if before is None else canonical(before),
    )


def read_files(storage, job_id: int, spec: MessageSpec, problem) -> Iterator[DataFile | ResolvedFile]:
    """The job's data files and every resolved file of a cloud-storage folder (`sinks.cloudstorage.SinkFolder`),
    in listing order. Files of other jobs are skipped (counted by `problem("other_job", name, ...)`); what is
    misnamed or malformed goes to `problem("naming", ...)`."""
    job = f"{job_id:016x}"
    for name in storage.list():
        match = NAME.match(name)
        if match is None:
            problem("naming", name, "not a data file or resolved file name")
            continue
        try:
            ts = naming.parse_ts33(match["ts"])
        except ValueError:
            problem("naming", name, f"{match['ts']} is not a valid timestamp")
            continue
        if match["part"] != naming.partition(ts, spec.partition_format):
            problem(
                "naming",
                name,
                f"folder {match['part'] or '(none)'!r} is not the {spec.partition_format} "
                f"partition {naming.partition(ts, spec.partition_format)!r} of its timestamp",
            )
        if match["resolved"]:
            yield _resolved(storage, name, ts, spec, problem)
            continue
        if match["job"] != job:
            problem("other_job", name, f"written by job {int(match['job'], 16)}")
            continue
        if match["ext"] != spec.extension:
            problem("naming", name, f"extension {match['ext']!r}, expected {spec.extension!r}")
            continue
        yield _data_file(storage, name, ts, match["topic"], spec, problem)


def _resolved(storage, name: str, ts: Hlc, spec: MessageSpec, problem) -> ResolvedFile:
    try:
        data = storage.read(name)
        if spec.format == "parquet":
            found = parse_hlc(f"{pl.read_parquet(io.BytesIO(data))[parquet.RESOLVED].item():.10f}")
        else:
            found = _resolved_ts(json.loads(data))
        if found != ts:
            raise ValueError
    except (ValueError, KeyError, AttributeError, TypeError, OSError, pl.exceptions.PolarsError):
        problem("naming", name, f"does not hold the resolved timestamp {ts}")
    return ResolvedFile(name, ts)


def _data_file(storage, name: str, ts: Hlc, topic: str, spec: MessageSpec, problem) -> DataFile:
    out = DataFile(name, ts)
    try:
        data = decompress(name, storage.read(name))
        # A file holds one batch: the options of its first message are those of every message in it.
        parsed = _typed_messages(data, topic, spec.at(ts)) if spec.format != "json" else _json_lines(data, spec)
        for number, item in enumerate(parsed, start=1):
            if isinstance(item, ValueError):
                problem("naming", f"{name}:{number}", str(item))
                continue
            key, msg_ts, after, before = item
            if msg_ts < ts:
                problem("naming", f"{name}:{number}", f"updated {msg_ts} is below the file's timestamp {ts}")
            out.messages.append(Message(name, number, topic, key, msg_ts, after, before))
    except (OSError, ValueError, KeyError, pl.exceptions.PolarsError) as exc:
        problem("naming", name, f"cannot be read: {exc}")
    return out


def _json_lines(data: bytes, spec: MessageSpec) -> Iterator[tuple | ValueError]:
    for line in data.decode().splitlines():
        try:
            yield parse_message(line, spec)
        except ValueError as exc:
            yield exc


def _restored(column: str, dtype: pl.DataType, schema: dict) -> pl.Expr:
    """An Avro record column cast back to the table's types (zones, small integers) where names match; a
    map's keys stay the text the file holds them as."""
    if not isinstance(dtype, pl.Struct):
        return pl.col(column)
    target = pl.Struct({f.name: _text_keyed(schema[f.name]) if f.name in schema else f.dtype for f in dtype.fields})
    return pl.col(column).cast(target)


def _text_keyed(dtype: pl.DataType, binary: pl.DataType = pl.Binary) -> pl.DataType:
    """`dtype` with every map's keys as text, and binary as `binary`: as a file that writes map keys as text
    (JSON, Avro) holds its values."""
    if isinstance(dtype, pl.Map):
        return pl.Map(pl.String, _text_keyed(dtype.value, binary))
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: _text_keyed(f.dtype, binary) for f in dtype.fields})
    if isinstance(dtype, (pl.List, pl.Array)):
        return pl.List(_text_keyed(dtype.inner, binary))
    return binary if dtype == pl.Binary else dtype


def _typed_messages(data: bytes, topic: str, spec: MessageSpec) -> Iterator[tuple | ValueError]:
    """(key, event timestamp, after, before) of each row of a Parquet, Avro or CSV file, in canonical JSON
    built by the same formatting as JSON messages, so that equal rows compare equal."""
    shape = spec.shapes.get(topic)  # csv and avro only
    if shape is None and spec.format != "parquet":
        raise ValueError(f"topic {topic} is none of the feed's tables")
    none = pl.lit(None, pl.String)
    if spec.format == "parquet":
        table = pq.read_table(io.BytesIO(data))
        meta = table.schema.metadata or {}
        keys, row = json.loads(meta[parquet.META_KEY]), json.loads(meta[parquet.META_ROW])
        df = pl.from_arrow(table)
        if not df[parquet.EVENT_TYPE].is_in(["c", "u", "d"]).all():
            raise ValueError(f"{parquet.EVENT_TYPE} holds a value other than c, u, d")
        view = df.select(
            pl.when(pl.col(parquet.EVENT_TYPE) != "d").then(pl.struct(row)).alias(frame.AFTER),
            pl.struct(keys).alias(frame.KEY),
            (pl.col(parquet.UPDATED) if spec.updated else none).alias("updated"),
            (pl.col(parquet.BEFORE) if spec.diff else none).alias("before"),
        )
        befores = view["before"].to_list()
    elif spec.format == "avro":
        df = read_avro(data)
        view = df.select(
            _restored("after", df.schema["after"], shape.schema).alias(frame.AFTER),
            _restored("key", df.schema["key"], shape.schema).alias(frame.KEY),
            (pl.col("updated") if spec.updated else none).alias("updated"),
            *([_restored("before", df.schema["before"], shape.schema).alias(frame.BEFORE)] if spec.diff else []),
        )
        befores = (
            view.select(object_json(view, frame.BEFORE)).to_series().to_list() if spec.diff else [None] * view.height
        )
    else:
        as_text = {c: pl.String if t == pl.Binary or t.is_nested() else t for c, t in shape.schema.items()}
        df = pl.read_csv(io.BytesIO(data), has_header=False, new_columns=list(shape.schema), schema=as_text)
        # a nested value is its JSON text, binary base64 (as in JSON messages): compared as such
        df = df.with_columns(
            pl.col(c).str.json_decode(_text_keyed(t, binary=pl.String))
            for c, t in shape.schema.items()
            if t.is_nested()
        )
        view = df.select(
            pl.struct(list(shape.schema)).alias(frame.AFTER),
            pl.struct(shape.key).alias(frame.KEY),
            none.alias("updated"),
        )
        befores = [None] * view.height
    texts = view.select(key_json(view).alias("k"), object_json(view, frame.AFTER).alias("a"), "updated")
    for (key, after, updated), before in zip(texts.iter_rows(), befores):
        if spec.updated and (updated is None or not _HLC.match(updated)):
            yield ValueError(f'updated is not a timestamp like "1700000000000000000.0000000000": {updated!r}')
            continue
        yield (
            canonical(json.loads(key)),
            parse_hlc(updated) if spec.updated else spec.start,
            None if after == "null" else canonical(json.loads(after)),
            None if before in (None, "null") else canonical(json.loads(before)),
        )


def read_partitions(partitions: dict[tuple[str, int], list], spec: MessageSpec, problem) -> Iterator[list]:
    """Per partition, its messages and resolved messages in offset order, as entries for the checks."""
    for (topic, partition), records in sorted(partitions.items()):
        entries: list[DataFile | ResolvedFile] = []
        run: DataFile | None = None
        for offset, key, value in records:
            where = f"{topic}[{partition}]@{offset}"
            text = (value or b"").decode("utf-8", errors="replace")
            if key is None:  # only resolved messages have no key
                run = None
                try:
                    entries.append(ResolvedFile(where, _resolved_ts(json.loads(text))))
                except (ValueError, KeyError, AttributeError, TypeError):
                    problem("naming", where, f"a message without a key is not a resolved message: {text[:80]}")
                continue
            try:
                msg_key, ts, after, before = parse_message(text, spec, key.decode("utf-8", errors="replace"))
            except ValueError as exc:
                problem("naming", where, str(exc))
                continue
            if run is None:
                run = DataFile(f"{topic}[{partition}]", None)
                entries.append(run)
            run.messages.append(Message(f"{topic}[{partition}]", offset, topic, msg_key, ts, after, before))
        yield entries


def _resolved_ts(value) -> Hlc:
    """The timestamp of a resolved message (wrapped, or under `__crdb__` when bare)."""
    inner = value.get("__crdb__", value)
    return parse_hlc(inner["resolved"])


def read_requests(requests: list[dict], target: str, spec: MessageSpec, problem) -> Iterator[DataFile | ResolvedFile]:
    """The requests an endpoint acknowledged, in order (`feedctl.testing.webhook_capture`), those sent to `target`
    (path and query) alone: each a batch `{"payload": [...], "length": N}` of messages carrying their
    topic, or a resolved message on its own."""
    for request in requests:
        if request["path"] != target:
            continue
        where = f"webhook:{request['seq']}"
        try:
            body = json.loads(request["body"])
        except ValueError:
            problem("naming", where, "the request body is not JSON")
            continue
        if not isinstance(body, dict):
            problem("naming", where, "the request body is not a JSON object")
        elif "payload" not in body:
            try:
                yield ResolvedFile(where, _resolved_ts(body))
            except (ValueError, KeyError, AttributeError, TypeError):
                problem("naming", where, f"neither a batch nor a resolved message: {request['body'][:80]}")
        elif not isinstance(body["payload"], list) or body.get("length") != len(body["payload"]):
            problem("naming", where, f'"length" {body.get("length")!r} does not count the "payload" array')
        else:
            batch = DataFile(where, None)
            for value in body["payload"]:
                meta = value.get("__crdb__", value) if isinstance(value, dict) else {}
                topic = meta.get("topic") if isinstance(meta, dict) else None
                try:
                    if not isinstance(topic, str):
                        raise ValueError('no "topic" field')
                    key, ts, after, before = parse_value(value, spec)
                except ValueError as exc:
                    problem("naming", where, str(exc))
                    continue
                batch.messages.append(Message("webhook", request["seq"], topic, key, ts, after, before))
            yield batch
