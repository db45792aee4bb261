"""Files written whole into local folders, many at once by a node's file writer process: what a consumer
listing the folders finds, and what the node is told of each file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from feedctl.sinks import local_files
from feedctl.sinks.local_files import FileWriter


@pytest.fixture
def writer():
    writer = FileWriter()
    yield writer
    writer.close()


def _files(root, count: int, body: bytes = b'{"resolved":"1.0"}') -> list[tuple[str, bytes]]:
    return [(str(root / f"f{n}" / "2026-12-02" / "x.RESOLVED"), body) for n in range(count)]


@pytest.mark.parametrize("where", ["process", "here"])
def test_each_file_is_written_once_whole_and_a_repeat_of_its_bytes_is_no_error(tmp_path, writer, where):
    put = writer.put_once_each if where == "process" else local_files.put_once_each
    files = _files(tmp_path, 50)
    assert put(files) == [None] * 50
    assert all(open(path, "rb").read() == body for path, body in files)
    assert put(files[:3]) == [None] * 3  # a repeat after a crash finds the same bytes there
    other = [(files[0][0], b'{"resolved":"2.0"}'), (str(tmp_path / "f1"), b"a folder is there")]
    [changed, folder] = put(other)
    assert changed.startswith(files[0][0]) and "exists with other contents" in changed
    assert folder is not None and "f1" in folder
    assert open(files[0][0], "rb").read() == files[0][1]  # left as it was
    leftovers = [n for _, _, names in os.walk(tmp_path) for n in names if n.endswith(".tmp")]
    assert leftovers == []


def test_a_writer_process_that_died_fails_the_request_then_a_new_one_writes(tmp_path, writer):
    files = _files(tmp_path, 3)
    assert writer.put_once_each(files[:1]) == [None]
    os.kill(writer._process.pid, signal.SIGKILL)
    writer._process.wait()
    with pytest.raises(OSError, match="file writer"):
        writer.put_once_each(files[1:2])
    assert writer.put_once_each(files[1:]) == [None, None]
    assert all(os.path.exists(path) for path, _ in files)


def test_the_writer_process_ends_when_its_node_is_killed(tmp_path):
    node = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from feedctl.sinks.local_files import FileWriter\n"
            "w = FileWriter(); assert w.put_once_each([(sys.argv[1], b'x')]) == [None]\n"
            "print(w._process.pid, flush=True); sys.stdin.read()",
            str(tmp_path / "a" / "x.RESOLVED"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pid = int(node.stdout.readline())
        node.kill()  # as kill -9 of the node
        node.wait()
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        node.kill()
        node.stdin.close()
        node.stdout.close()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, whose parent is gone and not yet reaped, is done)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
