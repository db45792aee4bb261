"""Cloud storage through fsspec: local disk, s3://, gs://, az://. Each file appears whole or not at all."""

from __future__ import annotations

import gzip
import os
import uuid
from pathlib import Path

from feedctl.project.sink_uri import local_path


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
    """The sink's folder; built again inside each Spark task from plain strings (it is not pickled)."""

    def __init__(self, uri: str, project_root: str, storage_options: dict | None = None):
        self.uri = uri
        self.local = local_path(uri, Path(project_root))
        if self.local is not None:
            self.fs = None
            self.root = str(self.local)
        else:
            import fsspec

            scheme = "abfs" if uri.startswith(("azure://", "az://")) else uri.split("://", 1)[0]
            self.fs = fsspec.filesystem(scheme, **(storage_options or {}))
            self.root = uri.split("://", 1)[1].split("?", 1)[0].rstrip("/")

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def put(self, name: str, data: bytes) -> None:
        path = self.path(name)
        if self.fs is None:
            # A temporary name beside the target, then a rename: readers never see a partial file.
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
            # Make the rename itself durable before a checkpoint can claim the file exists.
            directory = os.open(os.path.dirname(path), os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        else:
            self.fs.pipe_file(path, data)  # one PUT: an object appears whole

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
