"""`feedctl workload`: the movr demo's tables and a steady mix of changes."""

from __future__ import annotations

import click

from feedctl.cli.group import Context, handles_errors, main
from feedctl.commands import params
from feedctl.units import plural


@main.group()
def workload():
    """The movr demo: create its tables, then commit a steady mix of changes."""


@workload.command(name="init")
@click.argument("name", type=click.Choice(["movr"]))
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Users and vehicles to create (rides: twice as many).",
)
@click.option("--seed", type=int, default=1, show_default=True)
@handles_errors
def workload_init(ctx: Context, name, rows, seed):
    """Create the demo's Delta tables (change data feed on) where project.yml puts them."""
    from feedctl.commands.workload import init

    result = init(ctx.project_dir, rows, seed)
    for table in result.created:
        ctx.reporter.event(f"created {table} ({plural(result.rows[table], 'row')})", event="table_created", table=table)
    for table in result.existing:
        ctx.reporter.event(f"{table} exists; left as it is", event="table_exists", table=table)


@workload.command(name="run")
@click.argument("name", type=click.Choice(["movr"]))
@click.option(
    "--duration", default="30s", show_default=True, callback=params.seconds, help="How long to run, e.g. 30s or 2m."
)
@click.option("--rate", type=click.FloatRange(min=0.01), default=2.0, show_default=True, help="Commits per second.")
@click.option("--seed", type=int, help="Seed of the random choices (default: random).")
@handles_errors
def workload_run(ctx: Context, name, duration, rate, seed):
    """Commit inserts, updates, deletes and vehicle region changes to the demo tables."""
    from feedctl.commands.workload import run as run_workload

    stats = run_workload(ctx.project_dir, duration, rate, seed)
    ctx.reporter.event(
        f"{plural(stats.commits, 'commit')} in {stats.seconds:.1f}s: "
        + ", ".join(f"{k} {v}" for k, v in stats.by_action.items()),
        event="workload",
        commits=stats.commits,
    )
