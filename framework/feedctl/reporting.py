"""How results reach the terminal: text for people, JSON lines for machines (`--log-format json`), and
GitHub Actions' workflow commands (`--log-format github`), which annotate the files of a pull request."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from feedctl.diagnostics import Diagnostic


class Reporter:
    def __init__(self, log_format: str = "text", project_dir: str = "."):
        self.json = log_format == "json"
        self.github = log_format == "github"
        self.project_dir = project_dir

    def event(self, message: str, **fields) -> None:
        """A line of progress or a result; in JSON mode, an object with `event` and the fields."""
        if self.json:
            click.echo(json.dumps({"event": fields.pop("event", "info"), "message": message, **fields},
                                  sort_keys=True, default=str))
        else:
            click.echo(message)

    def diagnostics(self, diagnostics: list[Diagnostic]) -> None:
        for d in sorted(diagnostics):
            if self.github:
                click.echo(self._annotation(d))
            elif self.json:
                click.echo(json.dumps({"event": "diagnostic", **d.to_json()}, sort_keys=True), err=True)
            else:
                color = "red" if d.is_error else "yellow"
                click.echo(click.style(d.format(), fg=color) if sys.stderr.isatty() else d.format(), err=True)
        errors = sum(d.is_error for d in diagnostics)
        warnings = len(diagnostics) - errors
        if errors and not self.json:
            click.echo(f"{errors} error(s), {warnings} warning(s)", err=True)

    def _annotation(self, d: Diagnostic) -> str:
        """`::error file=…,line=…,col=…,title=…::message`, the file relative to the repository's root."""
        where = {"title": f"{d.code} {d.name}"}
        if d.file:
            root = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
            path = (Path(self.project_dir) / d.file).resolve()
            where = {"file": path.relative_to(root).as_posix() if path.is_relative_to(root) else d.file,
                     **({"line": d.line, "col": d.column} if d.line else {}), **where}
        properties = ",".join(f"{k}={_escape(str(v), property=True)}" for k, v in where.items())
        text = d.format().split("\n", 1)
        message = d.message + ("\n" + text[1] if len(text) > 1 else "")
        return f"::{'error' if d.is_error else 'warning'} {properties}::{_escape(message)}"

    def error(self, message: str) -> None:
        if self.github:
            click.echo(f"::error::{_escape(message)}")
        elif self.json:
            click.echo(json.dumps({"event": "error", "message": message}), err=True)
        else:
            click.echo(f"error: {message}", err=True)

    def table(self, title: str, columns: list[str], rows: list[list[str]], records: list[dict]) -> None:
        """A rich table for people; one JSON object per record for machines."""
        if self.json:
            for record in records:
                click.echo(json.dumps(record, sort_keys=True, default=str))
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
