"""`feedctl run`: the selected feeds' jobs, once or following."""

from __future__ import annotations

import sys

import click

from feedctl.cli.group import Context, handles_errors, main, select_option, state_option, vars_option
from feedctl.commands import params
from feedctl.diagnostics import UsageError


@main.command()
@select_option
@vars_option
@click.option("--follow", is_flag=True, help="Keep polling for new changes until interrupted.")
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between polls in --follow.",
)
@click.option("--node-id", help="This runner's name in the state store (default: the host name).")
@click.option("--new-job", is_flag=True, help="Start a new job for selected feeds whose job is canceled or failed.")
@click.option(
    "--cursor",
    metavar="TS",
    callback=params.timestamp,
    help="Start the new jobs of this run after this event timestamp, RFC 3339 time or version:<n> (as "
    "the feed's cursor option; not part of its definition).",
)
@click.option(
    "--continue",
    "continue_job",
    is_flag=True,
    help="Start the new jobs of this run at their feed's previous job's high-water mark.",
)
@click.option(
    "--rescan",
    is_flag=True,
    help="Let a new job scan its tables into the sink a previous job of its feed emitted into.",
)
@click.option(
    "--scan-table",
    "scan_tables",
    multiple=True,
    metavar="SOURCE.TABLE",
    help="With --new-job: also scan this table of the feed alone, at the new job's start, above everything "
    "emitted before (recovery; repeatable).",
)
@click.option(
    "--locality",
    default="",
    metavar="K=V,...",
    help="This runner's locality, e.g. region=us-east1; only nodes matching a feed's execution_locality "
    "coordinate and emit it.",
)
@click.option(
    "--span-grace",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a dead node keeps its spans, in case it comes back (0: they move at once).",
)
@click.option(
    "--locality-grace",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="How long a job waits for a live node matching its execution_locality before it fails "
    "(default: two liveness TTLs, 12 s).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="With --follow: serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0: any free port; "
    "the project's `metrics:` sets a default and the address).",
)
@click.option(
    "--max-retry-backoff",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="The longest wait between retries of what a retry may fix: a sink, Spark or the state store away "
    "(CockroachDB's changefeed.max_retry_backoff). Each failure doubles the wait, up to this.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --follow: the workers of each of the node's two pools, its jobs' coordinators' turns and its "
    "feeds' steps (default: 4 a core, at least 8).",
)
@click.option("--testing-kill-at", hidden=True, metavar="POINT[:N]", help="Tests: SIGKILL this run there.")
@click.option(
    "--testing-retry-backoff",
    hidden=True,
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Tests: the first wait between retries of a step (1 s), each failure doubling it.",
)
@handles_errors
def run(
    ctx: Context,
    selectors,
    vars_text,
    follow,
    poll_interval,
    node_id,
    new_job,
    cursor,
    continue_job,
    rescan,
    scan_tables,
    locality,
    span_grace,
    locality_grace,
    metrics_port,
    max_retry_backoff,
    workers,
    testing_kill_at,
    testing_retry_backoff,
):
    """Run the selected feeds' jobs: catch up and stop, or keep following with --follow."""
    import signal
    import threading

    from feedctl.commands.run import report_done, run_feeds
    from feedctl.node.settings import RunSettings

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if locality and not all("=" in tier for tier in locality.split(",")):
        raise UsageError(f"--locality {locality!r}: expected key=value pairs separated by commas")
    if metrics_port is not None and not follow:
        raise UsageError("--metrics-port serves a --follow node's metrics: add --follow")
    if workers is not None and not follow:
        raise UsageError("--workers sizes a --follow node's scheduler: add --follow")
    if cursor and continue_job:
        raise UsageError("--cursor and --continue both say where a new job starts: give one")
    if scan_tables and not new_job:
        raise UsageError("--scan-table scans a table at a new job's start: add --new-job")
    settings = RunSettings(
        follow=follow,
        poll_interval=poll_interval,
        new_job=new_job,
        cursor=cursor,
        continue_job=continue_job,
        rescan=rescan,
        scan_tables=scan_tables,
        locality=locality,
        span_grace=span_grace,
        locality_grace=locality_grace,
        max_backoff=max_retry_backoff,
        workers=workers,
    )
    if node_id:
        settings.node_id = node_id
    if testing_retry_backoff is not None:
        settings.retry_backoff = testing_retry_backoff
    if testing_kill_at:
        from feedctl.coordinator.knobs import TestingKnobs
        from feedctl.testing.faults import killer

        try:
            settings.knobs = TestingKnobs(reached=killer(testing_kill_at))
        except ValueError as exc:
            raise UsageError(f"--testing-kill-at {exc}") from None
    reports = run_feeds(
        ctx.project_dir,
        list(selectors),
        settings,
        stop,
        ctx.reporter.log,
        params.parse_vars(vars_text),
        metrics_port,
        summarize=not ctx.reporter.json,
    )
    if not report_done(reports, ctx.reporter.log):
        sys.exit(1)


@main.command(name="test")
@select_option
@state_option
@handles_errors
def test_command(ctx: Context, selectors, state_dir):
    """Run the unit tests of `tests/*.yml` (of the selected feeds): given changes, the messages a feed emits,
    each run as `feedctl run` runs it. Exit 1 when one fails."""
    import time

    from feedctl.commands.unit_test import run_tests

    started = time.perf_counter()

    def told(outcome) -> None:
        mark = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR"}[outcome.status]
        ctx.reporter.event(
            f"{outcome.where} {mark} ({outcome.seconds:.1f} s)",
            event="unit_test",
            test=outcome.where,
            status=outcome.status,
            seconds=round(outcome.seconds, 2),
            detail=outcome.lines,
        )
        if not ctx.reporter.json:
            for line in outcome.lines:
                ctx.reporter.event(f"    {line}")

    outcomes = run_tests(ctx.project_dir, list(selectors), state_dir, told)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "error")}
    said = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no unit tests"
    ctx.reporter.event(f"{said} in {time.perf_counter() - started:.1f} s", event="summary", **counts)
    if counts["failed"] or counts["error"]:
        sys.exit(1)
