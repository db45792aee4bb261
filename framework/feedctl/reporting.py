"""How results reach the terminal: text for people, JSON lines for machines (`--log-format json`), and
GitHub Actions' workflow commands (`--log-format github`), which annotate the files of a pull request."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import click

from feedctl.diagnostics import Diagnostic
from feedctl.project.env_vars import SECRET_VALUES
from feedctl.project.secrets import scrub_text
from feedctl.units import plural, size_text

JSON_PROGRESS_SECONDS = 5.0


def echo(text: str, err: bool = False) -> None:
    """A line for the terminal, every value env_var() returned in this process redacted: an error message
    that quotes a URL or a path, a description, a diagnostic, whatever its origin."""
    click.echo(scrub_text(text, SECRET_VALUES), err=err)


class Reporter:
    def __init__(self, log_format: str = "text", project_dir: str = "."):
        self.json = log_format == "json"
        self.github = log_format == "github"
        self.project_dir = project_dir
        self._live: ProgressBars | None = None  # once a batch's progress is shown on a terminal
        self._progress_said: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def event(self, message: str, **fields) -> None:
        """A line of progress or a result; in JSON mode, an object with `event` and the fields."""
        if self.json:
            echo(
                json.dumps(
                    {"event": fields.pop("event", "info"), "message": message, **fields}, sort_keys=True, default=str
                )
            )
        else:
            echo(message)

    def log(self, message: str, **fields) -> None:
        """An event of a running job, with the UTC time it happened: `02:40:01 message` for people, a `time`
        field (RFC 3339) for machines. A batch's `progress` is a bar on a terminal, an event every few seconds
        in JSON, and nothing otherwise."""
        now = datetime.now(timezone.utc)
        if fields.get("event") == "progress":
            if self.json and self._progress_due(fields):
                self.event(message, time=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"), **fields)
            elif not self.json and not self.github and sys.stdout.isatty():
                self._bars().show(fields)
        elif self.json:
            self.event(message, time=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"), **fields)
        elif self._live is not None:  # above the bars
            self._live.print(f"{now:%H:%M:%S} {message}")
        else:
            echo(f"{now:%H:%M:%S} {message}")

    def _progress_due(self, fields: dict) -> bool:
        """Every JSON_PROGRESS_SECONDS per batch, and its last."""
        key, now = (fields["feed"], fields["batch"]), time.monotonic()
        if fields.get("done") or now - self._progress_said.get(key, -JSON_PROGRESS_SECONDS) >= JSON_PROGRESS_SECONDS:
            self._progress_said[key] = now
            if fields.get("done"):
                self._progress_said.pop(key)
            return True
        return False

    def _bars(self) -> ProgressBars:
        with self._lock:  # feeds' threads may start their first bars at once
            if self._live is None:
                self._live = ProgressBars()
            return self._live

    def diagnostics(self, diagnostics: list[Diagnostic]) -> None:
        for d in sorted(diagnostics):
            if self.github:
                echo(self._annotation(d))
            elif self.json:
                echo(json.dumps({"event": "diagnostic", **d.to_json()}, sort_keys=True), err=True)
            else:
                color = "red" if d.is_error else "yellow"
                echo(click.style(d.format(), fg=color) if sys.stderr.isatty() else d.format(), err=True)
        errors = sum(d.is_error for d in diagnostics)
        warnings = len(diagnostics) - errors
        if errors and not self.json:
            echo(f"{plural(errors, 'error')}, {plural(warnings, 'warning')}", err=True)

    def _annotation(self, d: Diagnostic) -> str:
        """`::error file=…,line=…,col=…,title=…::message`, the file relative to the repository's root."""
        where = {"title": f"{d.code} {d.name}"}
        if d.file:
            root = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
            path = (Path(self.project_dir) / d.file).resolve()
            where = {
                "file": path.relative_to(root).as_posix() if path.is_relative_to(root) else d.file,
                **({"line": d.line, "col": d.column} if d.line else {}),
                **where,
            }
        properties = ",".join(f"{k}={_escape(str(v), property=True)}" for k, v in where.items())
        text = d.format().split("\n", 1)
        message = d.message + ("\n" + text[1] if len(text) > 1 else "")
        return f"::{'error' if d.is_error else 'warning'} {properties}::{_escape(message)}"

    def error(self, message: str) -> None:
        if self.github:
            echo(f"::error::{_escape(message)}")
        elif self.json:
            echo(json.dumps({"event": "error", "message": message}), err=True)
        else:
            echo(f"error: {message}", err=True)

    @contextmanager
    def status(self, text: str):
        """A line on the terminal's stderr that a long command updates as it goes (`update(text)`); nothing
        off a terminal or for machines."""
        if self.json or self.github or not sys.stderr.isatty():
            yield lambda text: None
            return
        from rich.console import Console

        with Console(stderr=True).status(text) as line:
            yield lambda now: line.update(now)

    def table(self, title: str, columns: list[str], rows: list[list[str]], records: list[dict]) -> None:
        """A rich table for people; one JSON object per record for machines."""
        if self.json:
            for record in records:
                echo(json.dumps(record, sort_keys=True, default=str))
            return
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(Text(str(cell)) for cell in row))  # users' text, never rich markup
        Console(width=None if sys.stdout.isatty() else 160).print(table)


def _escape(text: str, property: bool = False) -> str:
    """As GitHub's workflow commands read their data (and, in properties, `:` and `,`)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property else text


class ProgressBars:
    """Rich's bars of the batches being emitted, one per feed's batch, at the bottom of the terminal; other
    lines print above them. A bar goes once its batch is done."""

    def __init__(self):
        from rich.progress import BarColumn, Progress, TextColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[counts]}"),
            TextColumn("{task.fields[size]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[eta]}"),
            transient=True,
        )
        self.tasks: dict[tuple, int] = {}
        self.lock = threading.Lock()

    def show(self, fields: dict) -> None:
        key = (fields["feed"], fields["batch"])
        with self.lock:
            if not self.tasks:
                self.progress.start()
            if key not in self.tasks:
                self.tasks[key] = self.progress.add_task(
                    f"{fields['feed']} batch {fields['batch']} ({fields['kind']})",
                    total=None,
                    counts="",
                    size="",
                    rate="",
                    eta="",
                )
            eta = fields.get("eta_seconds")
            self.progress.update(
                self.tasks[key],
                completed=fields["rows"],
                total=fields["rows_total"] or None,
                counts=f"{fields['rows']:,}/~{fields['rows_total']:,} rows",
                size=size_text(fields["bytes"])
                + (f" of ~{size_text(fields['bytes_total'])}" if fields.get("bytes_total") else ""),
                rate=f"{fields['rate']:,} rows/s",
                eta=f"{eta // 60}:{eta % 60:02d} left" if eta is not None else "",
            )
            if fields.get("done"):
                self.progress.remove_task(self.tasks.pop(key))
                if not self.tasks:
                    self.progress.stop()

    def print(self, line: str) -> None:
        with self.lock:
            if self.tasks:
                self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
            else:
                echo(line)
