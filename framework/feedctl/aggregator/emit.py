"""The executor side of a batch: encode one partition's messages and hand them to the sink.

A partition holds whole spans, sorted by (span, event timestamp, key). For cloud storage each span's
messages go to their own files (JSON lines, CSV, Parquet or Avro), cut once a file reaches `file_size`; a
file is named after its first (lowest) event timestamp and a uniquer made of job, batch, span and file
number. Nothing here depends on how Spark cut the rows into Arrow batches, so a re-run of the batch writes the
same names with the same messages (the same bytes, but for the random sync marker of an Avro file).
Kafka, webhooks (and the null sink) take the messages in the same order; the task returns only once the sink
has acknowledged every one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from feedctl.aggregator import pairing
from feedctl.encoding import columnar, frame
from feedctl.encoding.json import JsonSpec, encode_values, key_json
from feedctl.sinks import naming
from feedctl.sinks.cloudstorage import CloudStorage, compress
from feedctl.units import Hlc

RESULT_SCHEMA = pa.schema([
    ("table", pa.string()), ("span", pa.int32()), ("file", pa.string()), ("messages", pa.int64()),
    ("bytes", pa.int64()), ("min_wall", pa.int64()), ("min_logical", pa.int32()), ("max_wall", pa.int64()),
    ("max_logical", pa.int32()),
])
RESULT_DDL = ("`table` string, span int, file string, messages bigint, bytes bigint, min_wall bigint, "
              "min_logical int, max_wall bigint, max_logical int")


@dataclass(frozen=True)
class EmitConfig:
    """Plain values only: it travels to the executors inside the task closure."""

    table: str
    topic: str
    schema_id: int
    job_id: int
    batch_seq: int
    uri: str
    project_root: str
    storage_options: dict
    file_size: int
    partition_format: str
    compression: str | None
    spec: dict  # JsonSpec fields
    format: str  # json | csv | parquet | avro
    kind: str = "cloudstorage"  # cloudstorage | kafka | webhook | null
    sink_config: dict = field(default_factory=dict)  # kafka: producer settings and headers; webhook: its config

    def to_dict(self) -> dict:
        return asdict(self)


class _SpanFile:
    """The file being filled for one span: its pieces (encoded text, or rows of a columnar format) and first
    and last timestamps."""

    def __init__(self, span: int, seq: int):
        self.span, self.seq = span, seq
        self.parts: list = []
        self.size = 0
        self.messages = 0
        self.first: tuple[int, int] | None = None
        self.last: tuple[int, int] | None = None


class Emitter:
    def __init__(self, config: EmitConfig):
        self.config = config
        self.spec = JsonSpec(**config.spec)
        self.sink = CloudStorage(config.uri, config.project_root, config.storage_options)
        self.current: _SpanFile | None = None
        self.results: list[dict] = []
        self.parquet_metadata: dict | None = None
        # A file is written (and made durable) on a thread of its own while the next one is encoded; one at a
        # time, in order, so files appear in the order they were cut.
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="sink-write")
        self.writes: deque[Future] = deque()

    def _render(self, parts: list) -> bytes:
        c = self.config
        if c.format == "parquet":  # compressed inside the file
            return columnar.parquet_bytes(parts, c.compression, self.parquet_metadata)
        if c.format == "avro":
            return columnar.avro_bytes(parts, c.topic, c.compression)
        data = columnar.csv_bytes(parts) if c.format == "csv" else b"".join(parts)
        return compress(data, c.compression)

    def _flush(self) -> None:
        f = self.current
        if f is None or not f.messages:
            return
        c = self.config
        first = Hlc(*f.first)
        name = naming.data_file(first, naming.uniquer(c.job_id, c.batch_seq, f.span, f.seq), c.topic, c.schema_id,
                                c.format, c.compression, c.partition_format)
        data = self._render(f.parts)
        self._wait_writes(1)  # this file's bytes and the one being written: no more in memory
        self.writes.append(self.writer.submit(self.sink.put, name, data))
        self.results.append({"table": c.table, "span": f.span, "file": name, "messages": f.messages,
                             "bytes": len(data), "min_wall": f.first[0], "min_logical": f.first[1],
                             "max_wall": f.last[0], "max_logical": f.last[1]})
        self.current = _SpanFile(f.span, f.seq + 1)

    def _rows(self, df: pl.DataFrame) -> tuple[pl.DataFrame, object, np.ndarray]:
        """The messages with their topic, what the files take of each (lines of text, or a frame) and the
        size of each."""
        c = self.config
        df = _with_topic(df, c, self.spec)
        if c.format == "json":
            lines = columnar.Lines(encode_values(df, self.spec, end="\n"))
            return df, lines, lines.sizes()
        if c.format == "parquet":
            self.parquet_metadata = columnar.parquet_metadata(df)
            rows = columnar.parquet_frame(df, self.spec)
        else:
            rows = columnar.avro_frame(df, self.spec) if c.format == "avro" else columnar.csv_frame(df)
        return df, rows, columnar.row_sizes(rows).to_numpy()

    def add(self, messages: pl.DataFrame) -> None:
        if messages.height == 0:
            return
        df, rows, sizes = self._rows(messages)
        spans = df[frame.SPAN].to_numpy()
        walls = df[frame.TS_WALL].to_numpy()
        logicals = df[frame.TS_LOGICAL].to_numpy()
        start = 0
        n = len(spans)
        while start < n:
            span = int(spans[start])
            if self.current is None or self.current.span != span:
                self._flush()
                self.current = _SpanFile(span, 0)
            end = start + int(np.argmax(spans[start:] != span)) if (spans[start:] != span).any() else n
            while start < end:
                f = self.current
                room = self.config.file_size - f.size
                cumulative = np.cumsum(sizes[start:end])
                # The row that fills the file closes it (a file may exceed file_size by one message).
                full = np.flatnonzero(cumulative >= room)
                stop = start + int(full[0]) + 1 if len(full) else end
                f.parts.append(rows.slice(start, stop - start))
                f.size += int(cumulative[stop - start - 1])
                f.messages += stop - start
                if f.first is None:
                    f.first = (int(walls[start]), int(logicals[start]))
                f.last = (int(walls[stop - 1]), int(logicals[stop - 1]))
                start = stop
                if len(full):
                    self._flush()

    def _wait_writes(self, in_flight: int) -> None:
        while len(self.writes) > in_flight:
            self.writes.popleft().result()  # a write's error is the task's

    def finish(self) -> list[dict]:
        """The files written: every one of them is in the sink when this returns."""
        self._flush()
        self._wait_writes(0)
        self.writer.shutdown()
        return self.results


def _with_topic(df: pl.DataFrame, config: EmitConfig, spec: JsonSpec) -> pl.DataFrame:
    if spec.topic_in_value:  # one topic per table: the encoder reads it as a column
        df = df.with_columns(pl.lit(config.topic, pl.String).alias(frame.TOPIC))
    return df


class StreamEmitter:
    """Kafka, webhooks and the null sink: every message in partition order; one result row per span."""

    def __init__(self, config: EmitConfig):
        self.config = config
        self.spec = JsonSpec(**config.spec)
        self.writer = None
        if config.kind == "kafka":
            from feedctl.sinks.kafka import KafkaWriter

            self.writer = KafkaWriter(config.sink_config["producer"], config.sink_config.get("headers"))
        elif config.kind == "webhook":
            from feedctl.sinks.webhook import WebhookWriter

            self.writer = WebhookWriter(config.sink_config)
        self.spans: list[pl.DataFrame] = []

    def add(self, messages: pl.DataFrame) -> None:
        if messages.height == 0:
            return
        df = _with_topic(messages, self.config, self.spec)
        values = encode_values(df, self.spec)
        if self.config.kind == "kafka":
            self.writer.send(self.config.topic, df.select(key_json(df)).to_series().to_list(), values.to_list())
        elif self.config.kind == "webhook":
            self.writer.send(values)
        self.spans.append(df.select(frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, values.str.len_bytes().alias("bytes"))
                          .group_by(frame.SPAN, maintain_order=True)
                          .agg(pl.len().alias("messages"), pl.col("bytes").sum(),
                               pl.col(frame.TS_WALL).first().alias("min_wall"),
                               pl.col(frame.TS_LOGICAL).first().alias("min_logical"),
                               pl.col(frame.TS_WALL).last().alias("max_wall"),
                               pl.col(frame.TS_LOGICAL).last().alias("max_logical")))

    def finish(self) -> list[dict]:
        if self.writer is not None:
            self.writer.finish()  # raises unless every message is acknowledged
        if not self.spans:
            return []
        # A span cut across Arrow batches: its rows are in timestamp order, so first of the first, last of the last.
        spans = pl.concat(self.spans).group_by(frame.SPAN, maintain_order=True).agg(
            pl.col("messages").sum(), pl.col("bytes").sum(), pl.col("min_wall").first(),
            pl.col("min_logical").first(), pl.col("max_wall").last(), pl.col("max_logical").last())
        return [{"table": self.config.table, "span": r[frame.SPAN], "file": "", **{k: r[k] for k in (
            "messages", "bytes", "min_wall", "min_logical", "max_wall", "max_logical")}}
            for r in spans.to_dicts()]


def _emitter(config: dict):
    emit = EmitConfig(**config)
    return Emitter(emit) if emit.kind == "cloudstorage" else StreamEmitter(emit)


def emit_spans(spans: Iterable[int], config: dict, changes, columns: list[str], key: list[str],
               diff: bool) -> Iterator[dict]:
    """Task body of a feed without a CDC query: each span the task was handed, read from its staged file (or
    its share of a scanned snapshot), paired and written; one result per file written (per span for sinks
    without files)."""
    emitter = _emitter(config)
    for span in spans:
        for view in pairing.task_changes(changes, span, columns, key):
            emitter.add(pairing.messages(view, columns, diff))
    yield from emitter.finish()


def emit_partition(batches, config: dict):
    """mapInArrow body of a feed with a CDC query: the query's output for the task's spans, in emission
    order; one result row per file written (per span for sinks without files)."""
    emitter = _emitter(config)
    for batch in batches:
        emitter.add(pl.from_arrow(batch))
    results = emitter.finish()
    if results:
        yield pa.RecordBatch.from_pylist(results, schema=RESULT_SCHEMA)
