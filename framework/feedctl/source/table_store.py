"""The files of one Delta table, wherever it is stored, addressed by their paths relative to its root.

Local tables are read by Arrow's own file system; tables in object stores through delta-rs's object store
(`DeltaStorageHandler`), so the table's `storage_options` mean what they mean to delta-rs.
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


class TableStore:
    def __init__(self, location: str, storage_options: dict | None = None):
        self.location = location.rstrip("/")
        local = local_root(self.location)
        self.local = local is not None
        if local is not None:
            self.root = local
            self.fs = pa_fs.SubTreeFileSystem(self.root, pa_fs.LocalFileSystem())
        else:
            from deltalake.fs import DeltaStorageHandler

            self.root = self.location
            self.fs = pa_fs.PyFileSystem(DeltaStorageHandler(self.location, storage_options or None))

    def relative(self, path: str) -> str:
        """A path the log names (URL-encoded, relative to the root or absolute) as a path of this store."""
        if "://" not in path and not path.startswith("/"):
            return unquote(path)
        absolute = unquote(urlparse(path).path if path.startswith("file:") else path)
        prefix = self.root.rstrip("/") + "/"
        if not absolute.startswith(prefix):
            raise FileNotFoundError(f"{path} is outside the table's folder {self.location}")
        return absolute[len(prefix) :]

    def open(self, path: str):
        return self.fs.open_input_file(path)

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return stream.read()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with self.fs.open_input_file(self.relative(path)) as handle:
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
