"""The `feedctl` command: parse flags, call one function of the package, print, set the exit code.

Exit codes: 0 success; 1 the project or a job has errors; 2 bad command-line usage.
"""

from __future__ import annotations

import functools
import sys
import time

import click

from feedctl import __version__
from feedctl.diagnostics import ProjectError, UsageError
from feedctl.reporting import Reporter


class Context:
    def __init__(self, project_dir: str, log_format: str, debug: bool):
        self.project_dir = project_dir
        self.reporter = Reporter(log_format)
        self.debug = debug


def handles_errors(command):
    """Known errors become a short message and an exit code; tracebacks only with --debug."""

    @functools.wraps(command)
    @click.pass_obj
    def wrapper(ctx: Context, *args, **kwargs):
        try:
            return command(ctx, *args, **kwargs)
        except ProjectError as exc:
            ctx.reporter.diagnostics(exc.diagnostics)
            sys.exit(1)
        except UsageError as exc:
            ctx.reporter.error(str(exc))
            sys.exit(2)
        except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:
            if ctx.debug:
                raise
            ctx.reporter.error(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)")
            sys.exit(1)

    return wrapper


def _parse_vars(text: str | None) -> dict | None:
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


select_option = click.option("-s", "--select", "selectors", multiple=True, metavar="SEL",
                             help="Feed names, tag:<tag>, table:<source.table> or sink:<sink>; repeatable.")
vars_option = click.option("--vars", "vars_text", metavar="YAML",
                           help="Override project vars, e.g. --vars '{min_battery: 30}'.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project-dir", default=".", envvar="FEEDCTL_PROJECT_DIR", show_default=True,
              type=click.Path(file_okay=False), help="Directory holding project.yml.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output for people or JSON lines for machines.")
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@click.version_option(__version__, prog_name="feedctl")
@click.pass_context
def main(click_ctx, project_dir, log_format, debug):
    """Changefeeds for Delta Lake tables, declared in YAML and SQL, run on Apache Spark."""
    click_ctx.obj = Context(project_dir, log_format, debug)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False))
@handles_errors
def init(ctx: Context, directory):
    """Create a new project in DIRECTORY that compiles as it is."""
    from feedctl.scaffold import create_project

    root = create_project(directory)
    ctx.reporter.event(f"Created project {root.name} in {root}", event="init", path=str(root))
    ctx.reporter.event(f"Next: feedctl --project-dir {directory} compile")


@main.command(name="compile")
@select_option
@vars_option
@handles_errors
def compile_command(ctx: Context, selectors, vars_text):
    """Validate the project and write target/manifest.json and target/compiled/."""
    from feedctl.compiler.compile import compile_project
    from feedctl.compiler.manifest import write_target

    started = time.perf_counter()
    result = compile_project(ctx.project_dir, list(selectors), _parse_vars(vars_text))
    path = write_target(result, list(selectors))
    ctx.reporter.diagnostics(result.warnings)
    elapsed = time.perf_counter() - started
    ctx.reporter.event(f"Compiled {len(result.feeds)} feed(s) in {elapsed:.2f}s: {path}", event="compiled",
                       feeds=len(result.feeds), warnings=len(result.warnings), manifest=str(path),
                       seconds=round(elapsed, 3))


@main.command(name="ls")
@select_option
@vars_option
@handles_errors
def ls_command(ctx: Context, selectors, vars_text):
    """List feeds with their tables and sinks."""
    from feedctl.listing import list_feeds

    records = list_feeds(ctx.project_dir, list(selectors), _parse_vars(vars_text))
    rows = [[r["name"], ", ".join(r["tables"]), r["sink"] or "(sinkless)", r["sink_uri"] or "",
             ", ".join(r["tags"]), r["description"]] for r in records]
    ctx.reporter.table(f"{len(records)} feed(s)", ["feed", "tables", "sink", "uri", "tags", "description"],
                       rows, records)


@main.command()
@handles_errors
def debug(ctx: Context):
    """Check Java, Spark, the state store, each source table and each sink."""
    from feedctl.debug_checks import run_checks

    checks = run_checks(ctx.project_dir)
    for check in checks:
        mark = "OK  " if check.ok else ("WARN" if check.warning else "FAIL")
        ctx.reporter.event(f"{mark} {check.name}: {check.detail}", event="check", check=check.name,
                           ok=check.ok, detail=check.detail)
    failed = [c for c in checks if not c.ok and not c.warning]
    ctx.reporter.event(f"{len(checks) - len(failed)}/{len(checks)} checks passed", event="summary",
                       failed=len(failed))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
