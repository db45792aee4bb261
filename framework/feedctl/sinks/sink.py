"""The sink interface. Every kind of sink is one module of this folder, which owns everything about it:

- its `SinkKind`: the URI schemes it takes, the sink options it accepts and the formats it writes, which
  `project/` asks the registry for at compile time (so a sink module imports nothing heavy at its top);
- the driver side, a `Sink` per job: what its task writers are built from, and resolved timestamps;
- the task side, a `SinkWriter` per Spark task, built from plain values, taking frames of messages in
  emission order and returning what it wrote once the sink has acknowledged all of it;
- the consumer side, `Sink.read`, which `feedctl verify` reads the sink with.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from feedctl.encoding.envelope import Envelope
from feedctl.options import resolve_sink
from feedctl.sinks import naming
from feedctl.units import Hlc


class VersionIn(StrEnum):
    """Where a feed's later contract versions emit, beside the first's (`sinks/versioned.py`)."""

    PATH = "path"  # a `vN` segment after the URI's path: a folder of files, a webhook's URL
    TOPIC = "topic"  # `_vN` after each topic's name
    NOWHERE = "nowhere"  # nothing is kept (the null sink)


@dataclass(frozen=True)
class ResolvedFile:
    """A resolved timestamp's file in a local folder (`Sink.resolved_file`)."""

    path: str
    body: bytes
    name: str  # as `write_resolved` returns it


@dataclass(frozen=True)
class SinkKind:
    name: str  # cloudstorage | kafka | webhook | null
    schemes: dict[str, str | None]  # URI scheme -> the Python module its backend needs (None: none)
    options: frozenset[str]  # sink options that apply to it
    formats: frozenset[str] = frozenset({"json"})  # formats it writes
    version_in: VersionIn = VersionIn.PATH  # where a feed's later contract versions emit (`sinks/versioned.py`)


@dataclass(frozen=True)
class TaskTarget:
    """Where one task writes one table's messages of one batch. Plain values only: it travels to the
    executors inside the task closure."""

    kind: str
    table: str
    topic: str
    schema_id: int
    job_id: int
    batch_seq: int
    format: str
    envelope: Envelope
    settings: dict = field(default_factory=dict)  # the sink's own (`Sink.task_settings`)
    progress: str | None = None  # `host:port` the task tells its progress to (`tasks/task_progress.py`)


class SinkWriter(ABC):
    """The task side: messages of whole spans, sorted by (span, event timestamp, key)."""

    def __init__(self, target: TaskTarget):
        self.target = target
        self.bytes_out = 0  # bytes handed to the sink so far: a task's progress

    @abstractmethod
    def add(self, messages) -> None:
        """Take a frame of messages (polars, the columns of `feedctl.frame`)."""

    def encoding(self) -> Hashable | None:
        """How it encodes a frame of messages, where what it writes of them depends on nothing else: feeds
        writing the same messages the same way (each into its own sink) may then encode them once
        (`encode`, `add_encoded`). None: it encodes as it sends."""
        return None

    def encode(self, messages):
        """The frame's messages encoded as `add_encoded` takes them (where `encoding` is not None)."""
        raise NotImplementedError

    def add_encoded(self, messages, encoded) -> None:
        """`add`, with the frame's messages encoded already (`encode`, maybe by another feed's writer)."""
        raise NotImplementedError

    @abstractmethod
    def finish(self) -> list[dict]:
        """Once the sink has acknowledged every message: one record per file written (per span for sinks
        without files): table, span, file, messages, bytes, min/max event timestamp."""


class Sink(ABC):
    """The driver side of one sink, for one job."""

    KIND: ClassVar[SinkKind]
    Writer: ClassVar[type[SinkWriter]]

    def __init__(self, uri: str, options: dict, project_root: str):
        self.uri = uri
        self.options = resolve_sink(options)
        self.project_root = project_root

    def topic(self, table: str, full_table_name: bool) -> str:
        return naming.topic_name(table, full_table_name, self.uri, self.options)

    def task_settings(self) -> dict:
        """What its writers need beyond the target, as plain values, resolved here in the driver: the
        executors may not share its environment."""
        return {}

    def target(
        self, table: str, topic: str, schema_id: int, job_id: int, batch_seq: int, fmt: str, envelope: Envelope
    ) -> TaskTarget:
        return TaskTarget(
            self.KIND.name, table, topic, schema_id, job_id, batch_seq, fmt, envelope, self.task_settings()
        )

    @abstractmethod
    def write_resolved(self, resolved: Hlc, fmt: str, envelope: str, topics: list[str]) -> str:
        """Tell the sink's consumers that everything at or below `resolved` has been emitted; returns where.
        Called after the checkpoint that reports it; a repeat after a crash is harmless."""

    def unreachable(self, timeout: float) -> str:
        """Why the sink cannot be reached now (`feedctl debug`), or "" when it answers within `timeout` seconds
        or is no server (a folder is checked for writing apart)."""
        return ""

    def resolved_file(self, resolved: Hlc, fmt: str, envelope: str) -> ResolvedFile | None:
        """The file in a local folder `write_resolved` writes, for a node to write with others' at once
        (`sinks/local_files.py`: `put_once`); None when it writes no such file."""
        return None

    def resolved_is_local(self) -> bool:
        """Whether a resolved timestamp is written on this machine (a local folder: a fraction of a
        millisecond), rather than sent over the network, where a sink away may hold a write for its timeout."""
        return False

    def newest_resolved(self) -> tuple[str, Hlc] | None:
        """The newest resolved timestamp a consumer may already have read here, and where (None: none, or a
        sink whose consumers read no folder)."""
        return None

    def read(self, job_id: int, topics: list[str], spec, problem, capture: str | None = None) -> Iterator[Iterable]:
        """The sink as its consumers read it, for `feedctl verify`: streams (each in its own order) of data
        files and resolved files (`verify.messages`). `problem(kind, where, text)` records what is wrong."""
        raise NotImplementedError(f"verify cannot read {self.KIND.name} sinks")
