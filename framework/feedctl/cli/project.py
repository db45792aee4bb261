"""Commands over the project's files: init, compile, schemas, ls, debug, plan."""

from __future__ import annotations

import sys

import click

from feedctl.cli.group import Context, handles_errors, main, select_option, state_option, vars_option
from feedctl.commands import params
from feedctl.diagnostics import ProjectError, Severity
from feedctl.reporting import echo
from feedctl.units import plural


@main.command()
@click.argument("directory", type=click.Path(file_okay=False))
@handles_errors
def init(ctx: Context, directory):
    """Create a new project in DIRECTORY that compiles as it is."""
    from feedctl.commands.init import SAMPLE_TABLE, create_project

    root = create_project(directory)
    ctx.reporter.event(f"Created project {root.name} in {root}", event="init", path=str(root))
    ctx.reporter.event(
        f"Wrote the sample table shop.orders (Delta, change data feed on) to {SAMPLE_TABLE}/: "
        f"commit it with the project, so that a clone has it",
        event="sample_table",
        path=SAMPLE_TABLE,
    )
    ctx.reporter.event(f"Next: feedctl --project-dir {directory} compile")


@main.command(name="compile")
@select_option
@state_option
@vars_option
@click.option("--warn-error", is_flag=True, help="Treat warnings as errors: exit 1 when there is any.")
@handles_errors
def compile_command(ctx: Context, selectors, state_dir, vars_text, warn_error):
    """Validate the project and write target/manifest.json and target/compiled/."""
    from dataclasses import replace

    from feedctl.commands.compile import compile_target

    done = compile_target(ctx.project_dir, list(selectors), params.parse_vars(vars_text), state_dir)
    result = done.result
    if warn_error and result.warnings:
        raise ProjectError([replace(d, severity=Severity.ERROR) for d in result.warnings])
    ctx.reporter.diagnostics(result.warnings)
    ctx.reporter.event(
        f"Compiled {plural(len(result.feeds), 'feed')} in {done.seconds:.2f}s: {done.manifest}",
        event="compiled",
        feeds=len(result.feeds),
        warnings=len(result.warnings),
        manifest=str(done.manifest),
        seconds=round(done.seconds, 3),
    )


@main.group()
def schemas():
    """The tables' columns, frozen in schemas.yml for compiling without the tables."""


@schemas.command(name="freeze")
@handles_errors
def schemas_freeze(ctx: Context):
    """Write schemas.yml: each table's columns and types, as the tables are now. Commit it: compile checks
    queries against it where a table cannot be opened, and warns when a table it opens differs from it."""
    from feedctl.commands.schemas import freeze

    if not freeze(ctx.project_dir, ctx.reporter.event, ctx.reporter.error):
        sys.exit(1)


@main.command(name="ls")
@select_option
@state_option
@vars_option
@handles_errors
def ls_command(ctx: Context, selectors, state_dir, vars_text):
    """List feeds with their tables and sinks."""
    from feedctl.commands.ls import list_feeds

    records = list_feeds(ctx.project_dir, list(selectors), params.parse_vars(vars_text), state_dir)
    rows = [
        [
            r["name"],
            ", ".join(r["tables"]),
            r["sink"] or "(sinkless)",
            r["sink_uri"] or "",
            ", ".join(r["tags"]),
            r["description"],
        ]
        for r in records
    ]
    ctx.reporter.table(
        plural(len(records), "feed"), ["feed", "tables", "sink", "uri", "tags", "description"], rows, records
    )


@main.command()
@handles_errors
def debug(ctx: Context):
    """Check Java, Spark, the state store, each source table and each sink, one line each.

    Java: found through JAVA_HOME or PATH, 17 or newer. Spark: a spark:// master accepts connections within 5 s;
    a Spark Connect remote gives a session whose executors import this feedctl within 30 s. The project
    compiles. The state store opens and can be written. Each table opens, and a first batch of its snapshot and
    of its changes reads; a table declared `changes: cdf` has its change data feed on. Each sink: a folder can
    be written, Kafka's brokers answer within 5 s, a webhook's host accepts a connection within 5 s. Exit 1
    when a check fails."""
    from feedctl.commands.debug import run_checks

    checks = run_checks(ctx.project_dir)
    for check in checks:
        mark = "OK  " if check.ok else ("WARN" if check.warning else "FAIL")
        ctx.reporter.event(
            f"{mark} {check.name}: {check.detail}", event="check", check=check.name, ok=check.ok, detail=check.detail
        )
    failed = [c for c in checks if not c.ok and not c.warning]
    ctx.reporter.event(f"{len(checks) - len(failed)}/{len(checks)} checks passed", event="summary", failed=len(failed))
    if failed:
        sys.exit(1)


@main.command()
@select_option
@vars_option
@click.option(
    "--state",
    "state_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Compare with an earlier build's manifest (the target/ of an earlier `feedctl compile`) rather "
    "than with the jobs in the state store; -s state:modified compares with it too.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option(
    "--fail-on",
    multiple=True,
    type=click.Choice(["new", "metadata", "backfill", "new-version", "new-job", "removed", "breaking"]),
    help="Exit 1 when a feed has this kind of change (repeatable); `breaking`: a breaking change of a feed's "
    "enforced contract whose version did not rise (with --state).",
)
@handles_errors
def plan(ctx: Context, selectors, vars_text, state_dir, fmt, fail_on):
    """What the project's changes do to its feeds' jobs: new, unchanged, metadata, backfill, new-version,
    new-job, removed."""
    from feedctl.commands import plan as planning

    planned = planning.plan(ctx.project_dir, list(selectors), state_dir, params.parse_vars(vars_text))
    echo({"text": planning.as_text, "markdown": planning.as_markdown, "json": planning.as_json}[fmt](planned))
    if any(c.change in fail_on or ("breaking" in fail_on and c.breaking) for c in planned.feeds):
        sys.exit(1)
