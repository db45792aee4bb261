"""Files written whole into local folders (a `file://` sink's), one at a time or many at once in a process of
their own (`FileWriter`).

A file here is nine system calls (a temporary file written and synced, linked or renamed, its folder synced).
Each lets the interpreter go and takes it back, and a thread taking it back waits its turn behind whichever
thread runs Python meanwhile: beside one busy thread, 333 resolved files written by eight threads took
3.08 s, against 0.25 s alone, and a node running hundreds of feeds writes that many a second while its
other threads emit batches. Written by a process of the node's own, a round's files cost the node one message
there and one back: 0.27 s beside the same busy thread (`bench/local_files.py`; BENCHMARKS.md, eighteenth
pass)."""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

# A temporary file's name is unique without a random draw each (a system call): this process's, and a count.
_PROCESS_TOKEN = uuid.uuid4().hex[:12]
_written = itertools.count()
AT_ONCE = 4  # files the writer process writes at once: their syncs wait on the disk together


def _temporary_suffix() -> str:
    # The pid too: Spark's Python workers fork from one process, after this module is imported.
    return f"{os.getpid()}.{_PROCESS_TOKEN}.{next(_written)}"


def write(path: str, data: bytes, exclusive: bool) -> None:
    """`data` into `path` whole: readers never see a partial file. `exclusive`: FileExistsError if `path`
    exists (a link, which refuses an existing name), else a file there is replaced (a rename)."""
    folder = os.path.dirname(path)
    # Plain descriptors: a node writes a resolved file per feed every interval, and Python's file objects ask
    # the terminal and the position of each.
    tmp = f"{folder}/.{os.path.basename(path)}.{_temporary_suffix()}.tmp"
    try:
        handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileNotFoundError:  # the folder's first file
        os.makedirs(folder, exist_ok=True)
        handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view) :]
        os.fsync(handle)
    finally:
        os.close(handle)
    try:
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed away
            os.unlink(tmp)
    # Make the rename itself durable before a checkpoint can claim the file exists.
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def put_once(path: str, data: bytes) -> bool:
    """`data` into `path` only if no file is there. True if this call wrote it; False if it held these bytes
    already (a repeat after a crash); FileExistsError if it holds other bytes."""
    try:
        write(path, data, exclusive=True)
        return True
    except FileExistsError:
        with open(path, "rb") as held:
            return held_already(path, held.read(), data)


def held_already(name: str, existing: bytes, data: bytes) -> bool:
    """False, for a `put_once` that found `name` holding `existing`, if that is `data` (a repeat after a
    crash); FileExistsError if it holds other bytes."""
    if existing != data:
        raise FileExistsError(f"{name} exists with other contents ({existing[:80]!r})")
    return False


def put_once_each(files: list[tuple[str, bytes]]) -> list[str | None]:
    """`put_once` of each (path, data): for each, None once it holds the data, else what failed."""
    return list(_pool().map(_put_once_said, files)) if len(files) > 1 else [_put_once_said(f) for f in files]


def _put_once_said(file: tuple[str, bytes]) -> str | None:
    try:
        put_once(*file)
        return None
    except OSError as error:
        return str(error)


_threads: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _threads
    if _threads is None:
        _threads = ThreadPoolExecutor(AT_ONCE, thread_name_prefix="put")
    return _threads


class FileWriter:
    """A process of the node's own writing files for it (`put_once_each` there), one request at a time; the
    node's threads send theirs in turn. A request the process failed raises; the next starts a new one. The
    process ends when the node's end of its pipe closes, however the node ends."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    def put_once_each(self, files: list[tuple[str, bytes]]) -> list[str | None]:
        if not files:
            return []
        with self._lock:
            process = self._process or self._start()
            try:
                pickle.dump(files, process.stdin, pickle.HIGHEST_PROTOCOL)
                process.stdin.flush()
                return pickle.load(process.stdout)
            except (OSError, EOFError, pickle.UnpicklingError):
                self._stop(process)
                raise OSError("the node's file writer process ended") from None

    def _start(self) -> subprocess.Popen:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "feedctl.sinks.local_files"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        return self._process

    def _stop(self, process: subprocess.Popen) -> None:
        self._process = None
        with contextlib.suppress(OSError):
            process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                self._stop(self._process)


def _serve() -> None:
    """The writer process: a request, then its answer, until the node closes the pipe."""
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            files = pickle.load(requests)
        except EOFError:
            return
        pickle.dump(put_once_each(files), answers, pickle.HIGHEST_PROTOCOL)
        answers.flush()


if __name__ == "__main__":
    _serve()
