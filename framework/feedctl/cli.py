"""The `feedctl` command: parse flags, call one function of the package, print, set the exit code.

Exit codes: 0 success; 1 the project or a job has errors; 2 bad command-line usage.
"""

from __future__ import annotations

import functools
import json
import os
import sys

import click

from feedctl import __version__
from feedctl.commands import params
from feedctl.spark.allocator import keep_freed_pages
from feedctl.diagnostics import ProjectError, Severity, UsageError
from feedctl.reporting import Reporter

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
            ctx.reporter.error(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)")
            sys.exit(1)

    return wrapper


def _json_lines(records: list[dict]) -> None:
    for record in records:
        click.echo(json.dumps(record, sort_keys=True))


select_option = click.option("-s", "--select", "selectors", multiple=True, metavar="SEL",
                             help="Feed names, tag:<tag>, table:<source.table> or sink:<sink>; repeatable.")
vars_option = click.option("--vars", "vars_text", metavar="YAML",
                           help="Override project vars, e.g. --vars '{min_battery: 30}'.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project-dir", default=".", envvar="FEEDCTL_PROJECT_DIR", show_default=True,
              type=click.Path(file_okay=False), help="Directory holding project.yml.")
@click.option("--log-format", type=click.Choice(["text", "json", "github"]), default="text", show_default=True,
              help="Output for people, JSON lines for machines, or GitHub Actions annotations.")
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@click.version_option(__version__, prog_name="feedctl")
@click.pass_context
def main(click_ctx, project_dir, log_format, debug):
    """Changefeeds for Delta Lake tables, declared in YAML and SQL, run on Apache Spark."""
    # The storage clients under deltalake log to stderr on their own (a table in S3 without credentials:
    # lines per attempt); what matters reaches the user as feedctl's own error. --debug lets them through.
    os.environ.setdefault("RUST_LOG", "warn" if debug else "error")
    click_ctx.obj = Context(project_dir, log_format, debug)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False))
@handles_errors
def init(ctx: Context, directory):
    """Create a new project in DIRECTORY that compiles as it is."""
    from feedctl.commands.init import create_project

    root = create_project(directory)
    ctx.reporter.event(f"Created project {root.name} in {root}", event="init", path=str(root))
    ctx.reporter.event(f"Next: feedctl --project-dir {directory} compile")


@main.command(name="compile")
@select_option
@vars_option
@click.option("--warn-error", is_flag=True, help="Treat warnings as errors: exit 1 when there is any.")
@handles_errors
def compile_command(ctx: Context, selectors, vars_text, warn_error):
    """Validate the project and write target/manifest.json and target/compiled/."""
    from dataclasses import replace

    from feedctl.commands.compile import compile_target

    done = compile_target(ctx.project_dir, list(selectors), params.parse_vars(vars_text))
    result = done.result
    if warn_error and result.warnings:
        raise ProjectError([replace(d, severity=Severity.ERROR) for d in result.warnings])
    ctx.reporter.diagnostics(result.warnings)
    ctx.reporter.event(f"Compiled {len(result.feeds)} feed(s) in {done.seconds:.2f}s: {done.manifest}",
                       event="compiled", feeds=len(result.feeds), warnings=len(result.warnings),
                       manifest=str(done.manifest), seconds=round(done.seconds, 3))


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
@vars_option
@handles_errors
def ls_command(ctx: Context, selectors, vars_text):
    """List feeds with their tables and sinks."""
    from feedctl.commands.ls import list_feeds

    records = list_feeds(ctx.project_dir, list(selectors), params.parse_vars(vars_text))
    rows = [[r["name"], ", ".join(r["tables"]), r["sink"] or "(sinkless)", r["sink_uri"] or "",
             ", ".join(r["tags"]), r["description"]] for r in records]
    ctx.reporter.table(f"{len(records)} feed(s)", ["feed", "tables", "sink", "uri", "tags", "description"],
                       rows, records)


@main.command()
@handles_errors
def debug(ctx: Context):
    """Check Java, Spark, the state store, each source table and each sink."""
    from feedctl.commands.debug import run_checks

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


@main.command()
@select_option
@vars_option
@click.option("--follow", is_flag=True, help="Keep polling for new changes until interrupted.")
@click.option("--poll-interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between polls in --follow.")
@click.option("--node-id", help="This runner's name in the state store (default: the host name).")
@click.option("--new-job", is_flag=True, help="Start a new job for selected feeds whose job is canceled or failed.")
@click.option("--cursor", metavar="TS", callback=params.timestamp,
              help="Start the new jobs of this run after this event timestamp, RFC 3339 time or version:<n> (as "
                   "the feed's cursor option; not part of its definition).")
@click.option("--continue", "continue_job", is_flag=True,
              help="Start the new jobs of this run at their feed's previous job's high-water mark.")
@click.option("--rescan", is_flag=True, help="Let a new job scan its tables into the sink a previous job of its "
              "feed emitted into.")
@click.option("--locality", default="", metavar="K=V,...",
              help="This runner's locality, e.g. region=us-east1; only nodes matching a feed's execution_locality "
                   "coordinate and emit it.")
@click.option("--span-grace", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="SECONDS",
              help="How long a dead node keeps its spans, in case it comes back (0: they move at once).")
@click.option("--locality-grace", type=click.FloatRange(min=0), metavar="SECONDS",
              help="How long a job waits for a live node matching its execution_locality before it fails "
                   "(default: two liveness TTLs, 12 s).")
@handles_errors
def run(ctx: Context, selectors, vars_text, follow, poll_interval, node_id, new_job, cursor, continue_job, rescan,
        locality, span_grace, locality_grace):
    """Run the selected feeds' jobs: catch up and stop, or keep following with --follow."""
    import signal
    import threading

    from feedctl.commands.run import report_done, run_feeds
    from feedctl.coordinator.runner import RunSettings

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if locality and not all("=" in tier for tier in locality.split(",")):
        raise UsageError(f"--locality {locality!r}: expected key=value pairs separated by commas")
    if cursor and continue_job:
        raise UsageError("--cursor and --continue both say where a new job starts: give one")
    settings = RunSettings(follow=follow, poll_interval=poll_interval, new_job=new_job, cursor=cursor,
                           continue_job=continue_job, rescan=rescan, locality=locality, span_grace=span_grace,
                           locality_grace=locality_grace)
    if node_id:
        settings.node_id = node_id
    reports = run_feeds(ctx.project_dir, list(selectors), settings, stop, ctx.reporter.event,
                        params.parse_vars(vars_text))
    if not report_done(reports, ctx.reporter.event):
        sys.exit(1)


@main.command()
@select_option
@vars_option
@click.option("--state", "state_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Compare with an earlier build's manifest (the target/ of an earlier `feedctl compile`) rather "
                   "than with the jobs in the state store.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--fail-on", multiple=True, type=click.Choice(["new", "metadata", "backfill", "new-job", "removed"]),
              help="Exit 1 when a feed has this kind of change (repeatable).")
@handles_errors
def plan(ctx: Context, selectors, vars_text, state_dir, fmt, fail_on):
    """What the project's changes do to its feeds' jobs: new, unchanged, metadata, backfill, new-job, removed."""
    from feedctl.commands import plan as planning

    changes = planning.plan(ctx.project_dir, list(selectors), state_dir, params.parse_vars(vars_text))
    click.echo({"text": planning.as_text, "markdown": planning.as_markdown, "json": planning.as_json}[fmt](changes))
    if any(c.change in fail_on for c in changes):
        sys.exit(1)


@main.command(name="jobs")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per job.")
@handles_errors
def jobs_command(ctx: Context, as_json):
    """One row per job: id, feed, status, high-water timestamp, running status, coordinator, error."""
    from feedctl.commands.jobs import JOB_COLUMNS, job_cell, job_records

    records = job_records(ctx.project_dir)
    if as_json:
        return _json_lines(records)
    rows = [[job_cell(r, c) for c in JOB_COLUMNS] for r in records]
    ctx.reporter.table(f"{len(records)} job(s)", JOB_COLUMNS, rows, records)


@main.command(name="status")
@click.argument("feed")
@click.option("--json", "as_json", is_flag=True, help="The job as one JSON object.")
@handles_errors
def status_command(ctx: Context, feed, as_json):
    """One job (by feed name or job id): its coordinator, lease, high-water mark, and each span's node,
    frontier and lag."""
    from feedctl.commands.status import job_status, span_cell, status_lines
    from feedctl.state.jobs import JobError

    try:
        record = job_status(ctx.project_dir, feed)
    except JobError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        return _json_lines([record])
    for line in status_lines(record):
        click.echo(line)
    columns = ["table", "span", "node", "home", "reason", "note", "frontier", "lag_seconds"]
    ctx.reporter.table(f"{len(record['spans'])} span(s), {record['lagging_spans']} lagging", columns,
                       [[span_cell(s, c) for c in columns] for s in record["spans"]], record["spans"])


@main.command(name="nodes")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per node.")
@handles_errors
def nodes_command(ctx: Context, as_json):
    """One row per node (a `feedctl run` process): id, locality, host, pid, live, heartbeat age, jobs
    coordinated, spans held in all and per feed."""
    from feedctl.commands.nodes import node_records, spans_cell

    records = node_records(ctx.project_dir)
    if as_json:
        return _json_lines(records)
    columns = ["node_id", "locality", "host", "pid", "live", "heartbeat_age_seconds", "jobs_coordinated",
               "spans_held", "spans_per_job"]
    rows = [[str(r[c]) for c in columns[:-1]] + [spans_cell(r)] for r in records]
    ctx.reporter.table(f"{len(records)} node(s)", columns, rows, records)


def _job_control(action: str):
    @click.argument("job")
    @handles_errors
    def command(ctx: Context, job):
        from feedctl.commands.control import control_job
        from feedctl.state.jobs import JobError

        try:
            done = control_job(ctx.project_dir, job, action)
        except JobError as exc:
            raise UsageError(str(exc)) from None
        ctx.reporter.event(f"job {done.job_id} ({done.feed}): {done.status}", event=action, job_id=done.job_id,
                           status=done.status)

    command.__doc__ = f"{action.capitalize()} a job, named by its id or by its feed."
    return main.command(name=action)(command)


for _action in ("pause", "resume", "cancel"):
    _job_control(_action)


@main.command()
@click.argument("feed")
@click.option("--cursor", callback=params.timestamp,
              help="Start after this event timestamp, RFC 3339 time or version:<n> (default: now).")
@click.option("--for", "duration", callback=params.seconds,
              help="Stop after this long, e.g. 30s (default: until interrupted).")
@click.option("--poll-interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True)
@handles_errors
def tail(ctx: Context, feed, cursor, duration, poll_interval):
    """Print FEED's messages to the terminal as they happen: no job, no state change."""
    import signal
    import threading

    from feedctl.commands.tail import tail as tail_feed

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    tail_feed(ctx.project_dir, feed, lambda line: click.echo(line), cursor, stop, duration, poll_interval)


@main.command()
@click.argument("feed")
@click.option("--job", "job_id", type=int, help="Verify this job of the feed (default: its newest).")
@click.option("--all-jobs", is_flag=True, help="Verify every job of the feed, and its sink across them.")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.option("--capture", type=click.Path(exists=True, dir_okay=False),
              help="Webhook sinks: the file the endpoint recorded its requests in.")
@handles_errors
def verify(ctx: Context, feed, job_id, all_jobs, as_json, capture):
    """Check FEED's sink against its tables' change history: missing changes, per-key order, resolved
    timestamps, naming and format, duplicates, and the final state of each key. Exit 1 on any violation."""
    from feedctl.verify.across_jobs import verify_all_jobs
    from feedctl.verify.feed import verify_feed

    if all_jobs and job_id is not None:
        raise UsageError("--job and --all-jobs: pass one")
    report = verify_all_jobs(ctx.project_dir, feed, capture) if all_jobs else \
        verify_feed(ctx.project_dir, feed, job_id, capture)
    if as_json:
        _json_lines([report.to_json()])
    else:
        click.echo("\n".join(report.lines()))
    if not report.ok:
        sys.exit(1)


@main.group()
def workload():
    """The movr demo: create its tables, then commit a steady mix of changes."""


@workload.command(name="init")
@click.argument("name", type=click.Choice(["movr"]))
@click.option("--rows", type=click.IntRange(min=1), default=100, show_default=True,
              help="Users and vehicles to create (rides: twice as many).")
@click.option("--seed", type=int, default=1, show_default=True)
@handles_errors
def workload_init(ctx: Context, name, rows, seed):
    """Create the demo's Delta tables (change data feed on) where project.yml puts them."""
    from feedctl.commands.workload import init

    result = init(ctx.project_dir, rows, seed)
    for table in result.created:
        ctx.reporter.event(f"created {table} ({result.rows[table]} rows)", event="table_created", table=table)
    for table in result.existing:
        ctx.reporter.event(f"{table} exists; left as it is", event="table_exists", table=table)


@workload.command(name="run")
@click.argument("name", type=click.Choice(["movr"]))
@click.option("--duration", default="30s", show_default=True, callback=params.seconds,
              help="How long to run, e.g. 30s or 2m.")
@click.option("--rate", type=click.FloatRange(min=0.01), default=2.0, show_default=True,
              help="Commits per second.")
@click.option("--seed", type=int, help="Seed of the random choices (default: random).")
@handles_errors
def workload_run(ctx: Context, name, duration, rate, seed):
    """Commit inserts, updates, deletes and vehicle region changes to the demo tables."""
    from feedctl.commands.workload import run as run_workload

    stats = run_workload(ctx.project_dir, duration, rate, seed)
    ctx.reporter.event(f"{stats.commits} commits in {stats.seconds:.1f}s: " + ", ".join(
        f"{k} {v}" for k, v in stats.by_action.items()), event="workload", commits=stats.commits)


if __name__ == "__main__":
    main()
