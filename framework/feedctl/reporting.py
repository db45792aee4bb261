"""How results reach the terminal: text for people, JSON lines for machines (`--log-format json`)."""

from __future__ import annotations

import json
import sys

import click

from feedctl.diagnostics import Diagnostic


class Reporter:
    def __init__(self, log_format: str = "text"):
        self.json = log_format == "json"

    def event(self, message: str, **fields) -> None:
        """A line of progress or a result; in JSON mode, an object with `event` and the fields."""
        if self.json:
            click.echo(json.dumps({"event": fields.pop("event", "info"), "message": message, **fields},
                                  sort_keys=True, default=str))
        else:
            click.echo(message)

    def diagnostics(self, diagnostics: list[Diagnostic]) -> None:
        for d in sorted(diagnostics):
            if self.json:
                click.echo(json.dumps({"event": "diagnostic", **d.to_json()}, sort_keys=True), err=True)
            else:
                color = "red" if d.is_error else "yellow"
                click.echo(click.style(d.format(), fg=color) if sys.stderr.isatty() else d.format(), err=True)
        errors = sum(d.is_error for d in diagnostics)
        warnings = len(diagnostics) - errors
        if errors and not self.json:
            click.echo(f"{errors} error(s), {warnings} warning(s)", err=True)

    def error(self, message: str) -> None:
        if self.json:
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
