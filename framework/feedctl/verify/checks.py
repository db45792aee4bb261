"""The checks of `feedctl verify`, over a sink's files in listing order and the messages the history says
must exist. Each finding is counted, and its first examples kept for the report.

- missing: a state the query selects, at or below the high-water mark, that no message carries;
- order: a previously unseen message of a key below one already seen for that key;
- resolved: a previously unseen message at or below a resolved timestamp listed before it, or a data file
  listed after a resolved file it is not above;
- naming: file names, folders, resolved files and message shapes that break the format;
- unexpected: a message of a key and timestamp the history has no selected state for;
- content: a message whose `after`/`before` differ from the table's row;
- duplicate_files: a data file whose every message repeats an earlier file;
- fingerprint: the last message of a key at or below the high-water mark differs from the table there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import numpy as np

from feedctl.sinks.messages import DataFile, ResolvedFile
from feedctl.units import Hlc
from feedctl.verify.history import Expected

CHECKS = {
    "missing": "missing changes",
    "order": "per-key order violations",
    "resolved": "resolved violations",
    "naming": "naming and format errors",
    "unexpected": "unexpected messages",
    "content": "content mismatches",
    "duplicate_files": "duplicate files",
    "fingerprint": "fingerprint mismatches",
}
EXAMPLES = 5

Ident = tuple[str, str, Hlc]  # topic, key, event timestamp


@dataclass
class Finding:
    count: int = 0
    examples: list[dict] = field(default_factory=list)


@dataclass
class Report:
    feed: str
    job_id: int
    job_status: str
    sink: str
    start: Hlc  # the job's start: with the high-water mark, the range the checks hold it to
    high_water: Hlc
    data_files: int = 0
    resolved_files: int = 0
    last_resolved: Hlc | None = None
    messages: int = 0
    duplicates: int = 0
    other_job_files: int = 0
    expected: int = 0
    above_high_water: int = 0  # expected states above the high-water mark: not yet due
    fingerprint_keys: int = 0
    fingerprint_note: str = ""
    unjudged: list[str] = field(default_factory=list)  # history that could not be read: what, and why
    unjudged_messages: int = 0  # messages at those event timestamps: not judged
    findings: dict[str, Finding] = field(default_factory=lambda: {name: Finding() for name in CHECKS})

    def add(self, check: str, where: str, detail: str) -> None:
        if check == "other_job":
            self.other_job_files += 1
            return
        finding = self.findings[check]
        finding.count += 1
        if len(finding.examples) < EXAMPLES:
            finding.examples.append({"where": where, "detail": detail})

    @property
    def ok(self) -> bool:
        """Nothing wrong found, and everything judged."""
        return not any(f.count for f in self.findings.values()) and not self.unjudged

    def to_json(self) -> dict:
        return {
            "feed": self.feed,
            "job_id": self.job_id,
            "job_status": self.job_status,
            "sink": self.sink,
            "start": str(self.start),
            "high_water": str(self.high_water),
            "ok": self.ok,
            "last_resolved": str(self.last_resolved) if self.last_resolved else None,
            "data_files": self.data_files,
            "resolved_files": self.resolved_files,
            "messages": self.messages,
            "duplicates": self.duplicates,
            "other_job_files": self.other_job_files,
            "expected": self.expected,
            "above_high_water": self.above_high_water,
            "fingerprint_keys": self.fingerprint_keys,
            "fingerprint_note": self.fingerprint_note,
            "unjudged": self.unjudged,
            "unjudged_messages": self.unjudged_messages,
            "checks": {name: {"count": f.count, "examples": f.examples} for name, f in self.findings.items()},
        }

    def lines(self) -> list[str]:
        # Kafka and webhooks hold messages, not files: their resolved timestamps are messages too.
        streamed = self.sink.split("://", 1)[0].startswith(("kafka", "webhook"))
        held = (
            f"{self.resolved_files} resolved messages"
            if streamed
            else f"{self.data_files} data files, {self.resolved_files} resolved files"
        )
        out = [
            f"verify {self.feed}: job {self.job_id} ({self.job_status}), sink {self.sink}",
            f"  from {self.start} to the high-water mark {self.high_water}; last resolved in the sink "
            f"{self.last_resolved if self.last_resolved else '(none)'}",
            f"  {held}, {self.messages} messages "
            f"({self.duplicates} duplicates); {self.expected} changes expected, "
            f"{self.above_high_water} of them above the high-water mark"
            + (f"; {self.other_job_files} files of other jobs ignored" if self.other_job_files else ""),
        ]
        for name, title in CHECKS.items():
            finding = self.findings[name]
            extra = ""
            if name == "fingerprint":
                extra = f"  ({self.fingerprint_note or f'{self.fingerprint_keys} keys compared'})"
            out += finding_lines(
                title, finding.count, [f"{e['where']}: {e['detail']}" for e in finding.examples], extra
            )
        if self.unjudged:
            out.append(
                f"  not judged: {len(self.unjudged)} pieces of history could not be read, "
                f"{self.unjudged_messages} messages at them"
            )
            out += [f"      {u}" for u in self.unjudged[:EXAMPLES]]
            if len(self.unjudged) > EXAMPLES:
                out.append(f"      ... and {len(self.unjudged) - EXAMPLES} more")
        violations = any(f.count for f in self.findings.values())
        out.append("FAILED" if violations else "NOT ALL JUDGED" if self.unjudged else "OK")
        return out


def finding_lines(title: str, count: int, examples: list[str], extra: str = "") -> list[str]:
    """A check's line of a report: its count, then its first examples."""
    out = [f"  {title:<28}{count:>8}{extra}", *(f"      {e}" for e in examples)]
    if count > len(examples):
        out.append(f"      ... and {count - len(examples)} more")
    return out


@dataclass
class Walk:
    """What the walk over the sink saw: every message identity, each key's newest message, where each key
    was (its Kafka partition), and each key's newest message ≤ high-water."""

    seen: set[Ident] = field(default_factory=set)
    newest: dict[tuple[str, str], Hlc] = field(default_factory=dict)
    stream: dict[tuple[str, str], str] = field(default_factory=dict)
    latest: dict[tuple[str, str], tuple[Hlc, str | None]] = field(default_factory=dict)


def walk_sink(
    report: Report,
    entries: Iterable[DataFile | ResolvedFile],
    expected: dict[Ident, Expected],
    walk: Walk | None = None,
    unjudged: frozenset[tuple[str, Hlc]] = frozenset(),
) -> Walk:
    """Check one ordered stream: a cloud-storage sink's listing, or one Kafka partition (`walk` then carries
    what earlier partitions showed; resolved timestamps hold within their own partition only). A message at
    a (topic, event timestamp) of `unjudged` has no history to be judged by: its order still is."""
    walk = walk or Walk()
    newest = walk.newest
    resolved: Hlc | None = None
    for entry in entries:
        if isinstance(entry, ResolvedFile):
            report.resolved_files += 1
            resolved = entry.ts if resolved is None else max(resolved, entry.ts)
            continue
        whole = entry.ts is not None  # a file, not a run of Kafka messages
        report.data_files += whole
        if whole and resolved is not None and entry.ts <= resolved:
            report.add("resolved", entry.name, f"data file at {entry.ts} listed after resolved {resolved}")
        fresh = 0
        for m in entry.messages:
            report.messages += 1
            ident = (m.topic, m.key, m.ts)
            want = expected.get(ident)
            if want is None and (m.topic, m.ts) in unjudged:
                report.unjudged_messages += 1
            elif want is None:
                report.add("unexpected", m.where, f"{m.topic} key {m.key} at {m.ts}: no such state in the history")
            elif (m.after, m.before) != (want.after, want.before):
                report.add(
                    "content",
                    m.where,
                    f"{m.topic} key {m.key} at {m.ts}: after {m.after} before {m.before}, "
                    f"expected after {want.after} before {want.before}",
                )
            if ident in walk.seen:
                report.duplicates += 1
                continue
            walk.seen.add(ident)
            fresh += 1
            row = (m.topic, m.key)
            if not whole and walk.stream.setdefault(row, m.file) != m.file:
                report.add(
                    "order",
                    m.where,
                    f"{m.topic} key {m.key} in {m.file}, earlier in {walk.stream[row]}: "
                    "a key must stay in one partition to keep its order",
                )
            last = newest.get(row)
            if last is not None and m.ts < last:
                report.add("order", m.where, f"{m.topic} key {m.key} at {m.ts} after the same key at {last}")
            else:
                newest[row] = m.ts
            if resolved is not None and m.ts <= resolved:
                report.add("resolved", m.where, f"{m.topic} key {m.key} at {m.ts} after resolved {resolved}")
            if m.ts <= report.high_water and (row not in walk.latest or walk.latest[row][0] < m.ts):
                walk.latest[row] = (m.ts, m.after)
        if whole and entry.messages and not fresh:
            report.add("duplicate_files", entry.name, f"all {len(entry.messages)} messages repeat earlier files")
    if resolved is not None:  # over several partitions, what all of them resolved
        report.last_resolved = resolved if report.last_resolved is None else min(report.last_resolved, resolved)
    return walk


def check_missing(report: Report, walk: Walk, expected: dict[Ident, Expected]) -> None:
    report.expected = len(expected)
    report.above_high_water = sum(ts > report.high_water for (_, _, ts) in expected)
    missing = sorted(
        (ts, topic, key)
        for (topic, key, ts) in expected
        if ts <= report.high_water and (topic, key, ts) not in walk.seen
    )
    for ts, topic, key in missing:
        report.add("missing", f"{topic} key {key}", f"the state at {ts} reached no message")


def check_fingerprint(
    report: Report,
    walk: Walk,
    topic: str,
    table: dict[str, str],
    every_key: bool,
    since: Hlc | None = None,
    widened: frozenset[str] = frozenset(),
) -> None:
    """The newest message of each key at or below the high-water mark against the table there; with an
    initial scan (or a backfill), every row of the table must have one. `since`: the table's key changed
    there; keys last emitted before are of the old key. `widened`: the columns whose type the job saw
    widened (no event: a message from before holds the value as its narrower type wrote it)."""
    keys = {key for (t, key), (ts, _) in walk.latest.items() if t == topic and (since is None or ts >= since)}
    keys |= set(table) if every_key else set()
    for key in sorted(keys):
        report.fingerprint_keys += 1
        ts, after = walk.latest.get((topic, key), (None, None))
        want = table.get(key)
        if ts is None:
            report.add("fingerprint", f"{topic} key {key}", "in the table at the high-water mark, in no message")
        elif after != want and not _older_schema(after, want) and not _narrower(after, want, widened):
            report.add(
                "fingerprint", f"{topic} key {key}", f"last message (at {ts}) has after {after}; the table has {want}"
            )


def _narrower(after: str | None, want: str | None, widened: frozenset[str]) -> bool:
    """A message written before a type widening: the same row, its widened columns' values as their narrower
    type wrote them (`1` for `1.0`, a float's shortest text for its double, a date for midnight)."""
    if not widened or after is None or want is None:
        return False
    message, row = json.loads(after), json.loads(want)
    return set(message) == set(row) and all(
        message[c] == row[c] or c in widened and _same_widened(message[c], row[c]) for c in row
    )


def _same_widened(narrow, wide) -> bool:
    if isinstance(narrow, dict) and isinstance(wide, dict):
        return set(narrow) == set(wide) and all(_same_widened(narrow[k], wide[k]) for k in wide)
    if isinstance(narrow, list) and isinstance(wide, list):
        return len(narrow) == len(wide) and all(_same_widened(a, b) for a, b in zip(narrow, wide))
    if isinstance(narrow, str) and isinstance(wide, str) and len(narrow) == 10:  # a date, now a timestamp
        return re.fullmatch(rf"{re.escape(narrow)}T00:00:00(\.0+)?Z?", wide) is not None
    try:
        a, b = Decimal(str(narrow)), Decimal(str(wide))
    except (InvalidOperation, ValueError):
        return narrow == wide
    return a == b or float(np.float32(float(a))) == float(b)  # a float widened to a double


def _older_schema(after: str | None, want: str | None) -> bool:
    """A message written under an older schema, with no change of its row since and no backfill (a column
    added without a value, or a schema change under `nobackfill`): the same row in the columns both have."""
    if after is None or want is None:
        return False
    message, row = json.loads(after), json.loads(want)
    return set(message) != set(row) and all(row[c] == message[c] for c in set(row) & set(message))
