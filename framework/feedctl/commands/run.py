"""`feedctl run`: compile the project, register the node, then run each selected feed's job once, or under
--follow supervise them until the node stops (`node/supervisor.py`), serving its metrics meanwhile."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from feedctl.compiler.compile import CompiledFeed, compile_project
from feedctl.coordinator.store_outage import StoreOutage
from feedctl.diagnostics import Severity
from feedctl.errors import RunError
from feedctl.job import earlier_version
from feedctl.metrics.node_gauges import FeedOnNode, NodeGauges
from feedctl.metrics.server import DEFAULT_HOST, serving
from feedctl.node.log_summary import SUMMARIZED_FROM, LogSummary
from feedctl.node.membership import Membership
from feedctl.node.project_watch import ProjectWatch
from feedctl.node.runner import JobRunner, loaded_now
from feedctl.node.settings import RunOutcome, RunReport, RunSettings
from feedctl.node.shared import Shared
from feedctl.node.spark_jobs import SparkJobs
from feedctl.node.supervisor import Supervisor, run_one
from feedctl.project.model import Project
from feedctl.spark import session
from feedctl.state import jobs
from feedctl.state.jobs import JobStatus
from feedctl.state.store import STORE_ERRORS, StateStore
from feedctl.units import plural


def run_feeds(
    project_dir: str | Path,
    selectors: list[str] | None = None,
    settings: RunSettings | None = None,
    stop: threading.Event | None = None,
    log=lambda message, **fields: None,
    vars_override: dict | None = None,
    metrics_port: int | None = None,
    summarize: bool = False,
) -> list[RunReport]:
    """Run the selected feeds' jobs; a --follow node serves Prometheus metrics on `metrics_port` (or the
    project's `metrics: {port}`) while it runs. With `summarize` (a log for people), a --follow node of many
    feeds says its routine lines as a summary every few seconds (`node/log_summary.py`)."""
    settings = settings or RunSettings()
    stop = stop or threading.Event()
    result = compile_project(project_dir, selectors, vars_override, lenient_columns=True)
    project = result.project
    store = StateStore.of_project(project)
    reports = []
    running = {name: c for name, c in result.feeds.items() if c.feed.sink is not None}
    for name, problem in _unknown_columns(result, store).items():  # no job of theirs to take up to the change
        del running[name]
        reports.append(RunReport(name, None, RunOutcome.ERROR, note=problem, error=problem))
    # One session for every feed of the process, started by whichever needs it first.
    spark = partial(
        session.spark_session,
        project.spark,
        quick=session.quick_compiler(any(c.sql for c in running.values()), settings.follow),
    )
    # Small batches are written by the node itself where Spark's executors would share its disk anyway.
    place = project.spark
    spark_jobs = SparkJobs(here_rows=settings.emit_here_rows if place.shares_disk and not place.connect else 0)
    summary = LogSummary(log) if summarize and settings.follow and len(running) >= SUMMARIZED_FROM else None
    log = summary or log
    outage = StoreOutage(log, settings.poll_interval, settings.max_backoff)
    shared = (
        Shared.following(store, settings, spark_jobs, outage)
        if settings.follow
        else Shared(spark_jobs, store_outage=outage)
    )
    # A --follow node works the spans of its feeds; a one-off run, those of the jobs it coordinates.
    works = tuple(sorted(running)) if settings.follow else ()
    with Membership(store, settings.node_id, settings.locality, settings.liveness_ttl, works) as node:
        settings = replace(settings, node_id=node.node.node_id)
        # A --follow node may stop one feed alone (its project changed under it): a stop of its own.
        own_stop = (lambda: threading.Event()) if settings.follow else (lambda: stop)
        make_runner = partial(JobRunner, store=store, settings=settings, log=log, spark_factory=spark, shared=shared)
        # When every feed's copy was loaded: one tick of the store's sequence. A tick per feed, among three nodes
        # starting 1,000 feeds each, kept a node's first feed from starting for over a minute.
        loaded = loaded_now(store)
        for name, compiled in result.feeds.items():
            if name not in running and compiled.feed.sink is None:
                reports.append(RunReport(name, None, RunOutcome.SKIPPED, note="no sink: read it with `feedctl tail`"))
        runners = _runners(
            project, running, store, lambda *a, **k: make_runner(*a, stop=own_stop(), loaded=loaded, **k), reports
        )
        if not settings.follow:
            return reports + _as_stored(store, [run_one(runner) for runner in runners])
        supervisor = Supervisor(
            store,
            node,
            settings,
            stop,
            outage,
            ProjectWatch(project.root, selectors, vars_override, log),
            make_runner,
            shared.feeds,
            log,
        )
        port = metrics_port if metrics_port is not None else project.metrics.get("port")
        gauges = NodeGauges(
            store,
            node.node.node_id,
            lambda: [FeedOnNode(r.job_id, r.backfilling, r.history_headroom) for r in supervisor.current.values()],
        )
        with _metrics(project.metrics.get("host", DEFAULT_HOST), port, log, gauges), shared:
            served = supervisor.serve(runners)
    if summary is not None:
        summary.close()
    return reports + _as_stored(store, served)


def _runners(project: Project, feeds: dict[str, CompiledFeed], store: StateStore, make, reports) -> list[JobRunner]:
    """A runner (made by `make`) of each feed's version the project defines, and of each running or paused job
    of its other versions, which runs on beside it from its own definition (`job/earlier_version.py`)."""
    runners = []
    with store.reading() as conn:
        others = {name: jobs.other_versions(conn, name, c.feed.version) for name, c in feeds.items()}
    for name, compiled in feeds.items():
        runners.append(make(project, compiled))
        for job in others[name]:
            try:
                as_run = earlier_version.as_compiled(job, compiled.feed, project)
            except RunError as exc:
                reports.append(RunReport(job.label, job.job_id, RunOutcome.ERROR, note=str(exc), error=str(exc)))
                continue
            runners.append(make(project, as_run, earlier=job.job_id))
    return runners


def _as_stored(store: StateStore, reports: list[RunReport]) -> list[RunReport]:
    """Each report's high-water mark and resolved timestamp as its job has them now: a node that did not
    coordinate saw the mark only when it started. The store away: as the run saw them."""
    try:
        with store.reading() as conn:
            for report in reports:
                if report.job_id is not None:
                    job = jobs.get_job(conn, report.job_id)
                    report.high_water, report.resolved = job.high_water, job.resolved
    except STORE_ERRORS:
        pass
    return reports


@contextmanager
def _metrics(host: str, port: int | None, log, gauges: NodeGauges):
    if port is None:
        yield
        return
    with serving(host, port, gauges) as bound:
        log(f"metrics at http://{host}:{bound}/metrics", event="metrics", host=host, port=bound)
        yield


def report_done(reports: list[RunReport], log) -> bool:
    """Say how each feed's run ended; False when one failed, or paused on an error."""
    for r in reports:
        log(
            f"{r.feed}: job {r.job_id or '-'} {r.status}; {plural(r.messages, 'message')} in "
            f"{plural(r.files, 'file')} over {plural(r.batches, 'batch')}; high-water {r.high_water.for_people()}"
            + (f"; {r.note}" if r.note else ""),
            event="feed_done",
            feed=r.feed,
            job_id=r.job_id,
            status=r.status,
            messages=r.messages,
            files=r.files,
            batches=r.batches,
            high_water=str(r.high_water),
            note=r.note,
        )
    return not any(r.status == RunOutcome.ERROR or r.error for r in reports)


def _unknown_columns(result, store: StateStore) -> dict[str, str]:
    """Feeds whose query names a column its table no longer has, and no running or paused job: a new job
    could not read it (a running one goes on up to the change that dropped it, then fails naming it)."""
    out = {}
    for name, compiled in result.feeds.items():
        found = [d for d in result.diagnostics if d.code == "FC518" and d.file == compiled.feed.query_file]
        if found and compiled.feed.sink is not None:
            with store.transaction() as conn:
                job = jobs.newest_job(conn, name, compiled.feed.version)
            if job is None or job.status not in (JobStatus.RUNNING, JobStatus.PAUSED):
                out[name] = "; ".join(replace(d, severity=Severity.ERROR).format() for d in found)
    return out
