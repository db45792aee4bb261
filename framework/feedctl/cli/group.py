"""The `feedctl` group: its global flags, the context every command gets, and how errors end a command."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys

import click

from feedctl import __version__
from feedctl.diagnostics import ProjectError, UsageError, first_line
from feedctl.reporting import Reporter, echo
from feedctl.spark.allocator import keep_freed_pages

keep_freed_pages()  # before any command imports polars


class Context:
    def __init__(self, project_dir: str, log_format: str, debug: bool):
        self.project_dir = project_dir
        self.reporter = Reporter(log_format, project_dir)
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
            said = _operational(exc)
            ctx.reporter.error(said or f"{type(exc).__name__}: {exc} (run with --debug for the traceback)")
            sys.exit(1)

    return wrapper


def _operational(exc: Exception) -> str | None:
    """An error of the setup around feedctl (the state store unreachable, a node id in use, a path it cannot
    write), said in its own words: no traceback to ask for, no library's links."""
    from sqlalchemy.exc import DBAPIError

    from feedctl.state.nodes import NodeError
    from feedctl.state.store import StateError

    if isinstance(exc, DBAPIError):
        return f"the state store failed: {first_line(exc.orig if exc.orig is not None else exc)}"
    if isinstance(exc, (NodeError, StateError)):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename is not None:  # a file where a folder belongs, no permission...
        return f"{exc.filename}: {exc.strerror or exc}"
    return None


def json_lines(records: list[dict]) -> None:
    for record in records:
        echo(json.dumps(record, sort_keys=True))


select_option = click.option(
    "-s",
    "--select",
    "selectors",
    multiple=True,
    metavar="SEL",
    help="Feed names, tag:<tag>, table:<source.table>, sink:<sink>, or state:modified[+] (with --state); repeatable.",
)
state_option = click.option(
    "--state",
    "state_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="The target/ of a deployed build (an earlier `feedctl compile`), that -s state:modified compares with.",
)
vars_option = click.option(
    "--vars", "vars_text", metavar="YAML", help="Override project vars, e.g. --vars '{min_battery: 30}'."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--project-dir",
    default=".",
    envvar="FEEDCTL_PROJECT_DIR",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory holding project.yml.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="Output for people, JSON lines for machines, or GitHub Actions annotations.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@click.version_option(__version__, prog_name="feedctl")
@click.pass_context
def main(click_ctx, project_dir, log_format, debug):
    """Changefeeds for Delta Lake tables, declared in YAML and SQL, run on Apache Spark."""
    # The storage clients under deltalake log to stderr on their own (a table in S3 without credentials:
    # lines per attempt); what matters reaches the user as feedctl's own error. --debug lets them through.
    os.environ.setdefault("RUST_LOG", "warn" if debug else "error")
    # Spark's JVM, likewise: its warnings and the JVM's start-up notices only with --debug (spark/jvm_logs.py).
    os.environ.setdefault("FEEDCTL_SPARK_LOG_LEVEL", "warn" if debug else "error")
    # The sinks' client libraries, likewise: librdkafka writes a line per broker per attempt while a broker
    # is away (sinks/kafka.py), botocore, Azure's and Google's clients warn on each retry. feedctl says once
    # that a sink is away, once a minute while it stays so, and when it is back (coordinator/backoff.py).
    os.environ.setdefault("FEEDCTL_LIBRARY_LOGS", "debug" if debug else "quiet")
    if not debug:
        for name in ("botocore", "boto3", "s3fs", "aiobotocore", "azure", "adlfs", "google", "gcsfs", "urllib3"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    click_ctx.obj = Context(project_dir, log_format, debug)
