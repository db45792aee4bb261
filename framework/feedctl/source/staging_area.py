"""Where batches are staged for the span tasks: the project's own disk (`target/stage`, for a `local[...]`
master), a shared mount (`file:///mnt/...`) or an object store every executor reaches (`s3://`, `gs://`,
`az://`), named by `staging:` in project.yml. Credentials and endpoints follow the sinks' rules (URI
parameters, then the standard environment variables), resolved once in the driver and handed to the tasks
with the area, since executors may not share the driver's environment."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from feedctl.sinks import store_options


def is_shared(location: str) -> bool:
    """Whether a staging location is meant to be reached from other hosts: a URL (`file://` included, a
    shared mount), not a plain path on the driver's disk."""
    return "://" in location


@dataclass(frozen=True)
class StagingArea:
    """A folder of staged batches; plain values only (it travels to the executors)."""

    location: str  # an absolute local path, or a URL with a scheme other than file://
    options: dict = field(default_factory=dict)  # the filesystem's arguments, resolved in the driver

    @staticmethod
    def at(location: str) -> StagingArea:
        if "://" not in location:
            return StagingArea(location)
        options = store_options.filesystem_options(location, None, os.environ)
        return StagingArea(f"{store_options.protocol(location)}://{store_options.root_path(location)}", options)

    @property
    def local(self) -> bool:
        return "://" not in self.location

    def filesystem(self):
        import fsspec

        return fsspec.filesystem(self.location.split("://", 1)[0], **self.options)

    def join(self, *parts: str) -> str:
        return "/".join([self.location.rstrip("/"), *parts])

    def size(self, paths: list[str]) -> int:
        if self.local:
            return sum(Path(p).stat().st_size for p in paths)
        fs = self.filesystem()
        return sum(fs.size(p) for p in paths)

    def remove(self, path: str) -> None:
        """Remove a folder and everything under it, if it exists."""
        if self.local:
            shutil.rmtree(path, ignore_errors=True)
            return
        try:
            self.filesystem().rm(path, recursive=True)
        except FileNotFoundError:
            pass
