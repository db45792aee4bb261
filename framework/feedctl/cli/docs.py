"""`feedctl docs`: the project's docs site."""

from __future__ import annotations

import click

from feedctl.cli.group import Context, handles_errors, main, vars_option
from feedctl.commands import params
from feedctl.units import plural


@main.group()
def docs():
    """A static site of the project: tables, feeds, sinks, lineage, jobs."""


@docs.command(name="generate")
@vars_option
@handles_errors
def docs_generate(ctx: Context, vars_text):
    """Compile, then write target/docs/index.html: one self-contained page, nothing fetched when viewed."""
    from feedctl.commands.docs import generate

    done = generate(ctx.project_dir, params.parse_vars(vars_text))
    jobs = "jobs not shown: the state store could not be read" if done.jobs is None else plural(done.jobs, "job")
    ctx.reporter.event(
        f"Wrote {done.path}: {plural(done.tables, 'table')}, {plural(done.feeds, 'feed')}, "
        f"{plural(done.sinks, 'sink')}, {jobs}",
        event="docs_generated",
        path=str(done.path),
        tables=done.tables,
        feeds=done.feeds,
        sinks=done.sinks,
        jobs=done.jobs,
    )


@docs.command(name="serve")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@handles_errors
def docs_serve(ctx: Context, port):
    """Serve target/docs/ on 127.0.0.1 until interrupted."""
    from feedctl.commands.docs import server

    httpd = server(ctx.project_dir, port)
    ctx.reporter.event(
        f"Serving the docs at http://127.0.0.1:{httpd.server_port}/ (Ctrl-C stops)",
        event="docs_serving",
        port=httpd.server_port,
    )
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
