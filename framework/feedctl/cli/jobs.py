"""Commands over the jobs in the state store: jobs, status, nodes, pause, resume, cancel, tail, verify."""

from __future__ import annotations

import sys

import click

from feedctl.cli.group import Context, handles_errors, json_lines, main, select_option
from feedctl.commands import params
from feedctl.diagnostics import UsageError
from feedctl.reporting import echo
from feedctl.state.jobs import JobStatus
from feedctl.units import plural


@main.command(name="jobs")
@click.option("--all", "every", is_flag=True, help="Every job of the state store's history, not each feed's newest.")
@click.option("--feed", "feeds", multiple=True, metavar="FEED", help="Jobs of this feed only (repeatable).")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice([s.value for s in JobStatus]),
    help="Jobs in this status only (repeatable).",
)
@select_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per job (JSON lines), every field.")
@handles_errors
def jobs_command(ctx: Context, every, feeds, statuses, selectors, as_json):
    """Each feed's (and version's) newest job: id, feed, status, high-water mark, lag, coordinating node,
    error or note."""
    from feedctl.commands.jobs import JOB_COLUMNS, job_cell, job_records

    records = job_records(ctx.project_dir, every, feeds, statuses, selectors, headroom=as_json)
    if as_json:
        return json_lines(records)
    rows = [[job_cell(r, c) for c in JOB_COLUMNS] for r in records]
    ctx.reporter.table(plural(len(records), "job"), JOB_COLUMNS, rows, records)


@main.command(name="retention")
@click.argument("table")
@click.option("--json", "as_json", is_flag=True, help="The answer as one JSON object.")
@handles_errors
def retention_command(ctx: Context, table, as_json):
    """The oldest version of TABLE (`source.table`) a running or paused job still needs, its headroom under
    the table's retention, and the VACUUM that keeps it."""
    from feedctl.commands.retention import oldest_needed

    needed = oldest_needed(ctx.project_dir, table)
    if as_json:
        return json_lines([needed.to_json()])
    for line in needed.lines():
        echo(line)


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
        return json_lines([record])
    for line in status_lines(record):
        echo(line)
    columns = ["table", "span", "node", "home", "reason", "note", "frontier", "lag_seconds"]
    ctx.reporter.table(
        f"{plural(len(record['spans']), 'span')}, {record['lagging_spans']} lagging",
        columns,
        [[span_cell(s, c) for c in columns] for s in record["spans"]],
        record["spans"],
    )


@main.command(name="nodes")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per node.")
@handles_errors
def nodes_command(ctx: Context, as_json):
    """One row per node (a `feedctl run` process): id, locality, host, pid, live, heartbeat age, jobs
    coordinated, spans held in all and per feed."""
    from feedctl.commands.nodes import node_records, spans_cell

    records = node_records(ctx.project_dir)
    if as_json:
        return json_lines(records)
    columns = [
        "node_id",
        "locality",
        "host",
        "pid",
        "live",
        "heartbeat_age_seconds",
        "jobs_coordinated",
        "spans_held",
        "spans_per_job",
    ]
    rows = [[str(r[c]) for c in columns[:-1]] + [spans_cell(r)] for r in records]
    ctx.reporter.table(plural(len(records), "node"), columns, rows, records)


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
        ctx.reporter.event(
            f"job {done.job_id} ({done.feed}): {done.status}", event=action, job_id=done.job_id, status=done.status
        )

    command.__doc__ = f"{action.capitalize()} a job, named by its id or by its feed."
    return main.command(name=action)(command)


for _action in ("pause", "resume", "cancel"):
    _job_control(_action)


@main.command()
@click.argument("feed")
@click.option(
    "--cursor",
    callback=params.timestamp,
    help="Start after this event timestamp, RFC 3339 time or version:<n> (default: now).",
)
@click.option(
    "--for", "duration", callback=params.seconds, help="Stop after this long, e.g. 30s (default: until interrupted)."
)
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
    tail_feed(
        ctx.project_dir, feed, lambda topic, line: click.echo(f"{topic}\t{line}"), cursor, stop, duration, poll_interval
    )


@main.command()
@click.argument("feed")
@click.option("--job", "job_id", type=int, help="Verify this job of the feed (default: its newest).")
@click.option("--all-jobs", is_flag=True, help="Verify every job of the feed, and its sink across them.")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.option(
    "--capture",
    type=click.Path(exists=True, dir_okay=False),
    help="Webhook sinks: the file the endpoint recorded its requests in.",
)
@handles_errors
def verify(ctx: Context, feed, job_id, all_jobs, as_json, capture):
    """Check FEED's sink against its tables' change history: missing changes, per-key order, resolved
    timestamps, naming and format, duplicates, and the final state of each key. Exit 1 on any violation."""
    from feedctl.verify.across_jobs import verify_all_jobs
    from feedctl.verify.feed import verify_feed

    if all_jobs and job_id is not None:
        raise UsageError("--job and --all-jobs: pass one")
    with ctx.reporter.status("verifying") as progress:
        report = (
            verify_all_jobs(ctx.project_dir, feed, capture, progress)
            if all_jobs
            else verify_feed(ctx.project_dir, feed, job_id, capture, progress)
        )
    if as_json:
        json_lines([report.to_json()])
    else:
        echo("\n".join(report.lines()))
    if not report.ok:
        sys.exit(1)
