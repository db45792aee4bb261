"""The files of one Delta table, wherever it is stored, addressed by their paths relative to its root, or
as its log names them.

Local tables are read by Arrow's own file system; tables in object stores through delta-rs's object store
(`DeltaStorageHandler`), so the table's `storage_options` mean what they mean to delta-rs.

The log names a file by a path relative to the table's root, or by an absolute URI (a shallow clone's data
files, a deletion vector of storage type `p`), either percent-encoded (`%20` a space, `%25` a `%`; `&` as it
is). An absolute one may lie outside the table's folder, in the same store: it is read there with the
table's options.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

import pyarrow.fs as pa_fs


def local_root(location: str) -> str | None:
    """The folder of a table on this host's file system; None for one in an object store."""
    location = location.rstrip("/")
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file") and len(parsed.scheme) != 1:  # one letter: a Windows drive
        return None
    return os.path.abspath(unquote(parsed.path) if parsed.scheme == "file" else location)


# The schemes naming one kind of object store, as delta-rs's object store takes them.
_STORES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "az": "az", "azure": "az", "abfs": "az", "abfss": "az"}


class TableStore:
    def __init__(self, location: str, storage_options: dict | None = None):
        self.location = location.rstrip("/")
        self.options = storage_options or None
        local = local_root(self.location)
        self.local = local is not None
        self._elsewhere: dict[str, pa_fs.FileSystem] = {}  # folders outside the table's, by URI
        if local is not None:
            self.root = local
            self.fs = pa_fs.SubTreeFileSystem(self.root, pa_fs.LocalFileSystem())
        else:
            self.root = self.location
            self.fs = self._object_store(self.location)

    def _object_store(self, folder: str) -> pa_fs.FileSystem:
        from deltalake.fs import DeltaStorageHandler

        return pa_fs.PyFileSystem(DeltaStorageHandler(folder, self.options))

    def located(self, path: str) -> tuple[pa_fs.FileSystem, str]:
        """The file system and path of a file the log names (relative or absolute, percent-encoded)."""
        if not (path.startswith(("/", "file:")) or "://" in path):  # a relative path may hold an encoded `:`
            return self.fs, unquote(path)
        parsed = urlparse(path)
        if self.local:
            if parsed.scheme not in ("", "file"):
                raise FileNotFoundError(f"{path} is not on this host's file system, where the table is")
            absolute = os.path.abspath(unquote(parsed.path))
            prefix = self.root.rstrip("/") + "/"
            if absolute.startswith(prefix):
                return self.fs, absolute[len(prefix) :]
            return pa_fs.LocalFileSystem(), absolute
        root = urlparse(self.location)
        if _STORES.get(parsed.scheme.lower()) != _STORES.get(root.scheme.lower()) or parsed.netloc != root.netloc:
            raise FileNotFoundError(f"{path} is not in the store of the table, {root.scheme}://{root.netloc}")
        absolute, prefix = unquote(parsed.path), unquote(root.path).rstrip("/") + "/"
        if absolute.startswith(prefix):
            return self.fs, absolute[len(prefix) :]
        folder, name = absolute.rsplit("/", 1)
        uri = f"{root.scheme}://{root.netloc}{folder}"
        if uri not in self._elsewhere:
            self._elsewhere[uri] = self._object_store(uri)
        return self._elsewhere[uri], name

    def open(self, path: str):
        """A file of the table by its path relative to the root."""
        return self.fs.open_input_file(path)

    def open_named(self, path: str):
        """A file as the log names it."""
        fs, located = self.located(path)
        return fs.open_input_file(located)

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return stream.read()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """`length` bytes at `offset` of a file as the log names it."""
        with self.open_named(path) as handle:
            handle.seek(offset)
            return handle.read(length)

    def modified(self, path: str) -> int:
        """A file's modification time, in nanoseconds since the epoch."""
        info = self.fs.get_file_info(path)
        if info.type != pa_fs.FileType.File:
            raise FileNotFoundError(f"{path} is not in {self.location}")
        return info.mtime_ns

    def names(self, folder: str) -> list[str]:
        """The names of the files in `folder` (none when it does not exist)."""
        infos = self.fs.get_file_info(pa_fs.FileSelector(folder, allow_not_found=True))
        return [info.base_name for info in infos if info.type == pa_fs.FileType.File]
