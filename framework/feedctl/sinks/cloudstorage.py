"""Cloud storage through fsspec: local disk, s3://, gs://, az://. Each file appears whole or not at all.

Throttling, server errors and lost connections are retried with exponential backoff by each store's own
client (s3fs and botocore, gcsfs, the Azure SDK); what still fails fails the batch, which the runner retries
and then pauses or fails per `on_error`, the high-water mark unmoved."""

from __future__ import annotations

import gzip
import os
import uuid
from pathlib import Path

from feedctl.project.sink_uri import local_path
from feedctl.sinks import store_options


def compress(data: bytes, compression: str | None) -> bytes:
    """Deterministic bytes: gzip without a timestamp in its header, so a re-run writes the same file."""
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if compression == "zstd":
        import pyarrow as pa

        return pa.compress(data, codec="zstd", asbytes=True)
    return data


def decompress(name: str, data: bytes) -> bytes:
    """A data file's bytes as written before compression, known by the file's extension."""
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".zst"):
        import pyarrow as pa

        return pa.input_stream(pa.BufferReader(data), compression="zstd").read()
    return data


class CloudStorage:
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
            import fsspec

            kind = store_options.protocol(uri)
            if kind == "gs":
                # gcsfs otherwise asks a gRPC control API for each bucket's type, which nothing but Google
                # itself answers (an emulator leaves it to time out); the sink needs no such bucket feature.
                os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            options = store_options.filesystem_options(uri, storage_options, os.environ)
            # A fresh instance per sink: fsspec's instance cache would hand back another sink's listing cache.
            self.fs = fsspec.filesystem(kind, skip_instance_cache=True, **options)
            self.root = store_options.root_path(uri)

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def put(self, name: str, data: bytes) -> None:
        """Write a file whole, replacing one of the same name (a re-run of a batch writes the same bytes)."""
        if self.fs is None:
            self._put_local(name, data, exclusive=False)
        else:
            self.fs.pipe_file(self.path(name), data)  # one PUT: an object appears whole

    def put_once(self, name: str, data: bytes) -> bool:
        """Write a file only if none of that name exists, with the store's conditional write, so two
        coordinators can never both write it. True if this call wrote it; False if it held these bytes
        already (a repeat after a crash); an error if it holds other bytes."""
        try:
            if self.fs is None:
                self._put_local(name, data, exclusive=True)
            else:
                self.fs.pipe_file(self.path(name), data, mode="create")
            return True
        except FileExistsError:
            existing = self.read(name)
            if existing != data:
                raise FileExistsError(f"{name} exists with other contents ({existing[:80]!r})") from None
            return False

    def _put_local(self, name: str, data: bytes, exclusive: bool) -> None:
        path = self.path(name)
        # A temporary name beside the target, then a rename (or a link, which refuses an existing name):
        # readers never see a partial file.
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            if exclusive:
                os.link(tmp, path)
            else:
                os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        # Make the rename itself durable before a checkpoint can claim the file exists.
        directory = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def list(self) -> list[str]:
        """Every file under the sink, relative to it, in lexicographic order; temporary files excluded."""
        if self.fs is None:
            if not os.path.isdir(self.root):
                return []
            names = [str(p.relative_to(self.root)).replace(os.sep, "/") for p in Path(self.root).rglob("*")
                     if p.is_file() and not p.name.startswith(".")]
        else:
            self.fs.invalidate_cache()
            names = [p[len(self.root) + 1:] for p in self.fs.find(self.root)]
        return sorted(names)

    def read(self, name: str) -> bytes:
        if self.fs is None:
            return Path(self.path(name)).read_bytes()
        return self.fs.cat_file(self.path(name))
