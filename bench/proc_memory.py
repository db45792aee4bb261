"""Peak resident memory of a process and of its whole tree (the JVM Spark starts is a child), sampled from
/proc while it runs: `VmHWM` is the kernel's own peak for one process; the tree's peak is the largest sum of
`VmRSS` seen in a sample."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass


@dataclass
class Peak:
    process_mib: float = 0.0  # the process itself (VmHWM)
    tree_mib: float = 0.0  # the process and its descendants, largest sampled sum


def _status(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])  # kB
    except OSError:
        pass
    return 0


def _tree(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def run_measured(
    argv: list[str], env: dict | None = None, every: float = 0.25
) -> tuple[subprocess.CompletedProcess, float, Peak]:
    """Run `argv` to its end: (result, seconds, peak memory)."""
    peak = Peak()
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every):
            peak.process_mib = max(peak.process_mib, _status(process.pid, "VmHWM") / 1024)
            peak.tree_mib = max(peak.tree_mib, sum(_status(p, "VmRSS") for p in _tree(process.pid)) / 1024)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr), seconds, peak
