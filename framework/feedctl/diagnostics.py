"""Diagnostics: every problem feedctl reports about a user's files.

A diagnostic carries a stable code (tests and users match on it, never on the message), the file, line
and column it points at, the JSON path inside a YAML document, what was expected and, for typos, the
nearest valid spelling.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from enum import Enum

from feedctl.units import plural


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


# code -> short name. Codes never change meaning; retired codes are not reused.
CODES: dict[str, str] = {
    # files and YAML
    "FC001": "project-not-found",
    "FC002": "file-unreadable",
    "FC003": "yaml-syntax",
    "FC004": "yaml-duplicate-key",
    "FC005": "yaml-not-a-document",
    # JSON Schema
    "FC101": "unknown-key",
    "FC102": "missing-key",
    "FC103": "wrong-type",
    "FC104": "invalid-value",
    "FC105": "invalid-format",
    "FC106": "out-of-range",
    "FC107": "invalid-duration",
    "FC108": "invalid-size",
    "FC109": "invalid-timestamp",
    "FC110": "env-var-not-here",
    # references between files
    "FC201": "duplicate-name",
    "FC202": "unknown-sink",
    "FC203": "unknown-table",
    "FC204": "query-file-missing",
    "FC205": "query-and-tables",
    "FC206": "no-tables",
    "FC207": "unknown-sink-scheme",
    "FC208": "unknown-column-in-source",
    "FC209": "feed-without-sink",
    "FC210": "invalid-state-url",
    # option combinations
    "FC301": "incompatible-options",
    "FC302": "option-not-for-sink",
    "FC303": "resolved-below-checkpoint",
    "FC304": "cursor-after-end-time",
    "FC305": "shared-cloud-storage-sink",
    "FC306": "staging-on-driver-disk",
    "FC307": "cursor-in-future",
    "FC308": "ignored-by-spark-connect",
    # Jinja
    "FC401": "jinja-syntax",
    "FC402": "jinja-undefined",
    "FC403": "env-var-unset",
    "FC404": "var-undefined",
    "FC405": "unknown-source",
    "FC406": "macro-syntax",
    "FC407": "template-refused",
    # CDC query rules
    "FC501": "sql-syntax",
    "FC502": "not-a-select",
    "FC503": "multiple-statements",
    "FC504": "not-one-table",
    "FC505": "join",
    "FC506": "subquery",
    "FC507": "cte",
    "FC508": "set-operation",
    "FC509": "aggregate",
    "FC510": "window-function",
    "FC511": "group-by",
    "FC512": "having",
    "FC513": "order-by",
    "FC514": "limit",
    "FC515": "distinct",
    "FC516": "non-deterministic-function",
    "FC517": "generator-function",
    "FC518": "unknown-column",
    "FC519": "table-not-a-source",
    "FC520": "unknown-cdc-function-argument",
    "FC521": "schema-check-skipped",
    "FC522": "frozen-schemas-invalid",
    "FC523": "table-differs-from-frozen-schema",
    "FC524": "table-feature-unreadable",
    "FC525": "change-data-feed-off",
    # command line
    "FC601": "unknown-feed",
    "FC602": "selector-matched-nothing",
    # unit tests (`feedctl test`)
    "FC701": "unit-test-invalid",
    "FC702": "unit-test-unknown-feed",
}


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem, sorted by file then position."""

    file: str
    line: int
    column: int
    code: str
    message: str
    severity: Severity = Severity.ERROR
    json_path: str = ""
    expected: str = ""
    hint: str = ""
    related: tuple[str, ...] = field(default=(), compare=False)

    @property
    def name(self) -> str:
        return CODES[self.code]

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def format(self) -> str:
        where = self.file or "<project>"
        if self.line:
            where += f":{self.line}:{self.column}"
        text = f"{where}: {self.severity.value} {self.code} [{self.name}] {self.message}"
        if self.json_path:
            text += f"\n    at {self.json_path}"
        if self.expected:
            text += f"\n    expected: {self.expected}"
        if self.hint:
            text += f"\n    {self.hint}"
        return text

    def to_json(self) -> dict:
        data = asdict(self)
        data["severity"] = self.severity.value
        data["name"] = self.name
        data["related"] = list(self.related)
        return data


class ProjectError(Exception):
    """Raised when a project has errors; carries every diagnostic found, warnings included."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = sorted(diagnostics)
        errors = [d for d in self.diagnostics if d.is_error]
        super().__init__(f"{plural(len(errors), 'error')} in the project")

    def __str__(self) -> str:
        return "\n".join(d.format() for d in self.diagnostics)


class UsageError(Exception):
    """Bad command-line input (exit code 2)."""


def did_you_mean(word: str, choices) -> str:
    """'did you mean "x"?' for the nearest choice, or '' when nothing is close."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f'did you mean "{matches[0]}"?' if matches else ""


def no_feed(name: str, feeds) -> str:
    """'no feed named "x"', with a did-you-mean among `feeds` where one is close."""
    hint = did_you_mean(name, feeds)
    return f'no feed named "{name}"' + (f"; {hint}" if hint else "")


_TRACEBACK = "Traceback (most recent call last):"
_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*): (.+)$")


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's message (or its type), for one-line reports. An error raised in a Spark
    worker arrives wrapped, its first line generic: what the worker raised is the line ending its traceback."""
    text = str(exc).strip()
    if _TRACEBACK in text:
        for line in text.rsplit(_TRACEBACK, 1)[1].splitlines():
            raised = _RAISED.match(line)
            if raised:
                return f"{raised[1]}: {raised[2]}"[:limit]
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def json_pointer(path) -> str:
    """A JSON path such as `$.feeds[0].options.resolved` for a tuple of keys and indexes."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
