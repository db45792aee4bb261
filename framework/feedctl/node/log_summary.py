"""The text log of a node running many feeds: its routine lines (a batch emitted, a checkpoint, a resolved
timestamp), which come per feed and per batch, told as one summary line per interval; everything else (a
job made, a retry, an error, a span moved) as it comes. `--log-format json` keeps every event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from feedctl.units import plural

ROUTINE = ("batch", "checkpoint", "resolved")
SUMMARIZED_FROM = 10  # feeds on a node from which its text log summarizes its routine lines
EVERY = 10.0  # seconds between summary lines


@dataclass
class _Seen:
    feeds: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROUTINE, 0))
    messages: int = 0
    files: int = 0


class LogSummary:
    """Wraps a node's `log`; a summary line is said with the first routine line after `every` seconds, and
    at `close`."""

    def __init__(self, log, every: float = EVERY):
        self.log, self.every = log, every
        self._lock = threading.Lock()
        self._seen, self._since = _Seen(), time.monotonic()

    def __call__(self, message: str, **fields) -> None:
        event = fields.get("event")
        if event not in ROUTINE:
            self.log(message, **fields)
            return
        with self._lock:
            seen = self._seen
            seen.feeds.add(fields.get("feed", ""))
            seen.counts[event] += 1
            seen.messages += fields.get("messages", 0) if event == "batch" else 0
            seen.files += fields.get("files", 0) if event == "batch" else 0
            due = time.monotonic() - self._since >= self.every
        if due:
            self.close()

    def close(self) -> None:
        with self._lock:
            seen, since = self._seen, self._since
            self._seen, self._since = _Seen(), time.monotonic()
        if not seen.feeds:
            return
        counts = seen.counts
        self.log(
            f"{plural(len(seen.feeds), 'feed')} in the last {time.monotonic() - since:.0f} s: "
            f"{plural(counts['batch'], 'batch')} emitted ({plural(seen.messages, 'message')} in "
            f"{plural(seen.files, 'file')}), {plural(counts['checkpoint'], 'checkpoint')}, "
            f"{plural(counts['resolved'], 'resolved timestamp')}",
            event="node_summary",
            feeds=len(seen.feeds),
            batches=counts["batch"],
            checkpoints=counts["checkpoint"],
            resolved=counts["resolved"],
            messages=seen.messages,
            files=seen.files,
        )
