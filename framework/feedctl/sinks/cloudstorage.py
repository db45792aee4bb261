"""Cloud-storage sinks (`file://`, `s3://`, `gs://`, `azure://`): files of one table, one span and one schema
each, named so that listing the folder in lexicographic order gives emission order.

Each span's messages go to their own files, cut once a file reaches `file_size`; a file is named after its
first (lowest) event timestamp and a uniquer made of job, batch, span and file number (`naming`). Nothing here
depends on how Spark cut the rows into Arrow batches, so a re-run of a batch writes the same names with the
same messages (the same bytes, but for the random sync marker of an Avro file). A file is written on a thread
of its own while the next is encoded, one at a time, in the order they were cut.

Each file appears whole or not at all (`SinkFolder`, through fsspec). Throttling, server errors and lost
connections are retried with exponential backoff by each store's own client (s3fs and botocore, gcsfs, the
Azure SDK); what still fails fails the batch, which the runner retries and then pauses or fails per
`on_error`, the high-water mark unmoved.

Compile reads `KIND` through the registry: the task side imports its columnar libraries when it runs.
"""

from __future__ import annotations

import os
import re
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from feedctl import frame
from feedctl.sinks import local_files, naming, store_options
from feedctl.sinks.held_clients import Shared
from feedctl.sinks.sink import ResolvedFile, Sink, SinkKind, SinkWriter, TaskTarget
from feedctl.units import Hlc, parse_size

VERSION_FOLDER = re.compile(r"v[0-9]+/")  # never a partition's (dates) nor a flat file's name (digits)

KIND = SinkKind(
    "cloudstorage",
    {"file": None, "s3": "s3fs", "gs": "gcsfs", "azure": "adlfs", "az": "adlfs"},
    frozenset({"file_size", "partition_format", "compression", "topic_prefix", "storage_options"}),
    frozenset({"json", "csv", "parquet", "avro"}),
)


def is_local(uri: str) -> bool:
    return uri.lower().startswith("file://")


def local_path(uri: str, project_root: Path) -> Path | None:
    """The folder of a `file://` sink; `file://target/x` is relative to the project, `file:///x` absolute."""
    if not is_local(uri):
        return None
    rest = uri.split("://", 1)[1]
    rest = urlsplit("file://" + rest).path if rest.startswith("/") else rest.split("?", 1)[0]
    path = Path(rest)
    return path if path.is_absolute() else project_root / path


def _filesystem(settings: dict):
    import fsspec

    return fsspec.filesystem(**settings, skip_instance_cache=True)


FILESYSTEMS = Shared(_filesystem, lambda fs: None)  # a filesystem's sessions close with it


class SinkFolder:
    """The sink's folder; built again inside each Spark task from plain strings (it is not pickled).

    `storage_options` are the filesystem's arguments as `store_options.filesystem_options` resolved them
    (the driver resolves them; resolving again only fills what is still missing from this process's
    environment)."""

    def __init__(self, uri: str, project_root: str, storage_options: dict | None = None):
        self.uri = uri
        self.local = local_path(uri, Path(project_root))
        if self.local is not None:
            self.fs = None
            self.root = str(self.local)
        else:
            kind = store_options.protocol(uri)
            if kind == "gs":
                # gcsfs otherwise asks a gRPC control API for each bucket's type, which nothing but Google
                # itself answers (an emulator leaves it to time out); the sink needs no such bucket feature.
                os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            options = store_options.filesystem_options(uri, storage_options, os.environ)
            # One filesystem per store and settings in this process, across tasks, batches and resolved writes
            # (`held_clients`); its listing cache is dropped before each listing (`list`).
            _, self.fs = FILESYSTEMS.get({"protocol": kind, **options})
            self.root = store_options.root_path(uri)

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def put(self, name: str, data: bytes) -> None:
        """Write a file whole, replacing one of the same name (a re-run of a batch writes the same bytes)."""
        if self.fs is None:
            local_files.write(self.path(name), data, exclusive=False)
        else:
            self.fs.pipe_file(self.path(name), data)  # one PUT: an object appears whole

    def put_once(self, name: str, data: bytes) -> bool:
        """Write a file only if none of that name exists, with the store's conditional write, so two
        coordinators can never both write it. True if this call wrote it; False if it held these bytes
        already (a repeat after a crash); an error if it holds other bytes."""
        if self.fs is None:
            return local_files.put_once(self.path(name), data)
        try:
            self.fs.pipe_file(self.path(name), data, mode="create")
            return True
        except FileExistsError:
            return local_files.held_already(name, self.read(name), data)

    def list(self) -> list[str]:
        """Every file under the sink, relative to it, in lexicographic order; temporary files excluded, and the
        folders of a feed's later contract versions (`v2/`: `sinks/versioned.py`), which are theirs."""
        if self.fs is None:
            if not os.path.isdir(self.root):
                return []
            names = [
                str(p.relative_to(self.root)).replace(os.sep, "/")
                for p in Path(self.root).rglob("*")
                if p.is_file() and not p.name.startswith(".")
            ]
        else:
            self.fs.invalidate_cache()
            names = [p[len(self.root) + 1 :] for p in self.fs.find(self.root)]
        return sorted(n for n in names if not VERSION_FOLDER.match(n))

    def read(self, name: str) -> bytes:
        if self.fs is None:
            return Path(self.path(name)).read_bytes()
        return self.fs.cat_file(self.path(name))


class _SpanFile:
    """The file being filled for one span: its pieces (encoded lines, or rows of a columnar format) and first
    and last timestamps."""

    def __init__(self, span: int, seq: int):
        self.span, self.seq = span, seq
        self.parts: list = []
        self.size = 0
        self.messages = 0
        self.first: tuple[int, int] | None = None
        self.last: tuple[int, int] | None = None


WRITTEN_HERE = 4 << 20  # bytes of a batch's files written by the task itself before a thread writes them


class FileWriter(SinkWriter):
    def __init__(self, target: TaskTarget):
        from feedctl.encoding.formats import encoder

        super().__init__(target)
        s = target.settings
        self.folder = SinkFolder(s["uri"], s["project_root"], s["storage_options"])
        self.encoder = encoder(target.format, target.envelope, target.topic, s["compression"])
        self.current: _SpanFile | None = None
        self.results: list[dict] = []
        # Past its first few MiB, a batch's files are written on a thread of their own while the next is encoded;
        # a small batch's are written here, sparing a thread started for them: a node writing the small batches
        # of hundreds of feeds started one per batch.
        self.writer: ThreadPoolExecutor | None = None
        self.writes: deque[Future] = deque()

    def _flush(self) -> None:
        f = self.current
        if f is None or not f.messages:
            return
        t, s = self.target, self.target.settings
        name = naming.data_file(
            Hlc(*f.first),
            naming.uniquer(t.job_id, t.batch_seq, f.span, f.seq),
            t.topic,
            t.schema_id,
            t.format,
            s["compression"],
            s["partition_format"],
        )
        data = self.encoder.file(f.parts)
        self._put(name, data)
        self.bytes_out += len(data)
        self.results.append(
            {
                "table": t.table,
                "span": f.span,
                "file": name,
                "messages": f.messages,
                "emitted": f.size,  # the messages as encoded
                "bytes": len(data),  # the file as stored: framed, and compressed if so set
                "min_wall": f.first[0],
                "min_logical": f.first[1],
                "max_wall": f.last[0],
                "max_logical": f.last[1],
            }
        )
        self.current = _SpanFile(f.span, f.seq + 1)

    def encoding(self) -> tuple:
        t = self.target
        return t.format, t.envelope, t.topic, t.settings["compression"]

    def encode(self, messages) -> tuple:
        return self.encoder.encode(messages)

    def add(self, messages) -> None:
        if messages.height:
            self.add_encoded(messages, self.encoder.encode(messages))

    def add_encoded(self, messages, encoded: tuple) -> None:
        import numpy as np

        if messages.height == 0:
            return
        pieces, sizes = encoded
        spans = messages[frame.SPAN].to_numpy()
        walls = messages[frame.TS_WALL].to_numpy()
        logicals = messages[frame.TS_LOGICAL].to_numpy()
        file_size = self.target.settings["file_size"]
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
                room = file_size - f.size
                cumulative = np.cumsum(sizes[start:end])
                # The row that fills the file closes it (a file may exceed file_size by one message).
                full = np.flatnonzero(cumulative >= room)
                stop = start + int(full[0]) + 1 if len(full) else end
                f.parts.append(pieces.slice(start, stop - start))
                f.size += int(cumulative[stop - start - 1])
                f.messages += stop - start
                if f.first is None:
                    f.first = (int(walls[start]), int(logicals[start]))
                f.last = (int(walls[stop - 1]), int(logicals[stop - 1]))
                start = stop
                if len(full):
                    self._flush()

    def _put(self, name: str, data: bytes) -> None:
        if self.writer is None:
            if self.bytes_out + len(data) <= WRITTEN_HERE:
                self.folder.put(name, data)
                return
            self.writer = ThreadPoolExecutor(1, thread_name_prefix="sink-write")
        self._wait_writes(1)  # this file's bytes and the one being written: no more in memory
        self.writes.append(self.writer.submit(self.folder.put, name, data))

    def _wait_writes(self, in_flight: int) -> None:
        while len(self.writes) > in_flight:
            self.writes.popleft().result()  # a write's error is the task's

    def finish(self) -> list[dict]:
        """The files written: every one of them is in the sink when this returns."""
        self._flush()
        self._wait_writes(0)
        if self.writer is not None:
            self.writer.shutdown()
        return self.results


class CloudStorageSink(Sink):
    KIND = KIND
    Writer = FileWriter

    def folder(self) -> SinkFolder:
        """The sink's folder; a local one built once (a node writes a resolved file per feed every
        interval), an object store's each time from its options as they are."""
        local = getattr(self, "_local_folder", None)
        if local is not None:
            return local
        folder = SinkFolder(self.uri, self.project_root, self.options["storage_options"])
        if folder.fs is None:
            self._local_folder = folder
        return folder

    def task_settings(self) -> dict:
        o = self.options
        return {
            "uri": self.uri,
            "project_root": self.project_root,
            "compression": o["compression"],
            "storage_options": store_options.filesystem_options(self.uri, o["storage_options"], os.environ),
            "file_size": parse_size(o["file_size"]),
            "partition_format": o["partition_format"],
        }

    def write_resolved(self, resolved: Hlc, fmt: str, envelope: str, topics: list[str]) -> str:
        """`<partition>/<ts33>.RESOLVED` holding `{"resolved":"<ns>.<logical>"}` (Parquet for a Parquet feed),
        written once with the store's conditional write: a repeat after a crash finds the same bytes there, and
        a second coordinator cannot write it too."""
        name, body = self._resolved(resolved, fmt, envelope)
        self.folder().put_once(name, body)
        return name

    def resolved_file(self, resolved: Hlc, fmt: str, envelope: str) -> ResolvedFile | None:
        if not is_local(self.uri):  # an object store's folder is built anew at each call: not for nothing
            return None
        name, body = self._resolved(resolved, fmt, envelope)
        return ResolvedFile(self.folder().path(name), body, name)

    def _resolved(self, resolved: Hlc, fmt: str, envelope: str) -> tuple[str, bytes]:
        """The name and the bytes of the resolved file of `resolved`."""
        from feedctl.encoding.json import resolved_message

        name = naming.resolved_file(resolved, self.options["partition_format"])
        if fmt == "parquet":  # a Parquet feed's consumers read Parquet, as CockroachDB writes it
            from feedctl.encoding.parquet import resolved_parquet

            return name, resolved_parquet(str(resolved))
        return name, resolved_message(str(resolved), envelope).encode()

    def resolved_is_local(self) -> bool:
        return is_local(self.uri)

    def newest_resolved(self) -> tuple[str, Hlc] | None:
        """The RESOLVED file that sorts last in the folder, from any job: a consumer listing the folder may
        have read everything up to it."""
        names = [n for n in self.folder().list() if n.endswith(".RESOLVED")]
        if not names:
            return None
        return names[-1], naming.parse_ts33(names[-1].rsplit("/", 1)[-1].split(".")[0])

    def read(self, job_id: int, topics: list[str], spec, problem, capture: str | None = None):
        """One stream: every file of the folder in lexicographic order, as a consumer lists them."""
        from feedctl.sinks.messages import read_files

        yield read_files(self.folder(), job_id, spec, problem)
