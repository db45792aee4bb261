"""Values of the command line that need reading: timestamps, durations and --vars, read as the project's
files read them, and refused with click's usage error (exit 2) or feedctl's."""

from __future__ import annotations

import time

import click

from feedctl.diagnostics import UsageError


def timestamp(click_ctx, param, value: str | None) -> str | None:
    """A cursor: an event timestamp, an RFC 3339 time or version:<n>."""
    if value:
        from feedctl.units import parse_timestamp

        try:
            point = parse_timestamp(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if point.hlc is not None and point.hlc.wall > time.time_ns():
            raise click.BadParameter(f"{value} is in the future: a job starts at a time that has passed")
    return value


def seconds(click_ctx, param, value: str | None) -> float | None:
    """A duration, `30s` or `2m`, in seconds."""
    from feedctl.units import parse_duration

    try:
        return parse_duration(value) if value else None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_vars(text: str | None) -> dict | None:
    """--vars, read like the project's files: YAML 1.2 booleans, dates kept as strings, JSON's types only."""
    from feedctl.project.yaml_source import parse_yaml

    if not text:
        return None
    doc, problems = parse_yaml(text, "--vars")
    if problems or doc is None:
        raise UsageError("--vars is not valid YAML: " + "; ".join(p.message for p in problems))
    value = doc.data
    if not isinstance(value, dict):
        raise UsageError("--vars must be a mapping, e.g. --vars '{min_battery: 30}'")
    return value
