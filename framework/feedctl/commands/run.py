"""`feedctl run`: compile the project, then run each selected feed's job (one thread per feed in --follow)."""

from __future__ import annotations

import hashlib
import threading
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from feedctl.commands.project_watch import ProjectWatch
from feedctl.compiler.compile import CompiledFeed, compile_project
from feedctl.coordinator.failure import store_failure
from feedctl.coordinator.store_outage import StoreOutage
from feedctl.diagnostics import Severity, first_line
from feedctl.errors import RunError
from feedctl.job import earlier_version
from feedctl.metrics.node_gauges import FeedOnNode, NodeGauges
from feedctl.metrics.server import DEFAULT_HOST, serving
from feedctl.node.log_summary import SUMMARIZED_FROM, LogSummary
from feedctl.node.membership import Membership
from feedctl.node.runner import JobRunner, loaded_now
from feedctl.node.settings import RunOutcome, RunReport, RunSettings
from feedctl.node.shared import Shared
from feedctl.node.spark_jobs import SparkJobs
from feedctl.project.model import Project
from feedctl.spark import session
from feedctl.state import jobs, nodes, spans
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
            return reports + _as_stored(store, [_run_one(runner) for runner in runners])
        threads, out = [], {}
        # each feed version's runner now (`orders`, `orders@v2`): a --follow node runs job after job
        current = {r.label: r for r in runners}
        project_watch = ProjectWatch(project.root, selectors, vars_override, log)
        port = metrics_port if metrics_port is not None else project.metrics.get("port")
        metrics = _metrics(
            project.metrics.get("host", DEFAULT_HOST),
            port,
            log,
            NodeGauges(
                store,
                node.node.node_id,
                lambda: [FeedOnNode(r.job_id, r.backfilling, r.history_headroom) for r in current.values()],
            ),
        )
        again = replace(settings, new_job=False, cursor=None, continue_job=False, rescan=False)

        def retried(step, label):
            return _store_step(step, label, stop, outage)

        def work(runner):
            name, feed = runner.label, runner.feed.name
            while True:
                try:
                    report = out[name] = _run_one(runner)
                    if report.status == RunOutcome.ERROR:  # said at once, not when the node stops
                        log(
                            f"{name}: not run on this node: {report.error}",
                            event="feed_refused",
                            feed=name,
                            error=report.error,
                        )
                finally:  # its spans are placed elsewhere at the coordinator's next step
                    report = out.get(name)
                    retried(partial(_leave, store, node, runner, report), name)
                if runner.earlier is not None or runner.left_version:  # another version's job runs once
                    ended.add(name)
                    return
                if not retried(
                    partial(_wait_for_work, store, runner, report, stop, settings.poll_interval, outage), name
                ):
                    if runner.left_version:
                        ended.add(name)
                    return
                runner = current[name] = runner.again(again)
                job = retried(partial(_start_working, store, node, runner), name)
                if stop.is_set():
                    return
                if job is not None and job.job_id != report.job_id:
                    log(
                        f"{name}: job {job.job_id} runs; this node takes its part in it",
                        event="job_adopted",
                        feed=feed,
                        job_id=job.job_id,
                    )

        ended = set()  # the labels of runners of other versions' jobs that ended: a label may start again

        def start(runner):
            ended.discard(runner.label)
            current[runner.label] = runner
            thread = threading.Thread(target=work, args=(runner,), name=f"feed-{runner.label}", daemon=True)
            thread.start()
            threads.append(thread)

        draining = False
        with metrics, shared:
            for one in sorted(runners, key=lambda r: _turn(node.node.node_id, r.label)):
                start(one)
            for thread in threads:  # a feed's new version, started below, joins the list
                while thread.is_alive():
                    if node.lost.is_set():  # another process took this node's id: stop acting as it
                        stop.set()
                    if stop.is_set() and not draining:
                        draining = True
                        log(
                            "draining: this node's spans and leases go to the other nodes at their next step",
                            event="drain",
                            node=node.node.node_id,
                        )
                    if stop.is_set():
                        for runner in current.values():
                            runner.halt()
                    else:
                        live = [r for label, r in current.items() if label not in ended]
                        for new_project, compiled, at in _take(project_watch.poll(), live, store, log):
                            start(make_runner(new_project, compiled, stop=threading.Event(), loaded=at))
                    thread.join(0.2)
    if summary is not None:
        summary.close()
    return reports + _as_stored(store, [out[name] for name in current if name in out])


def _turn(node_id: str, label: str) -> bytes:
    """Where a feed comes in the order a --follow node starts its feeds (a few at a time, `Shared.starting`):
    an order of each node's own. Nodes starting together in one order raced to make each feed's job, two of
    three makes refused, and their coordinators to claim it; in orders of their own, each feed's job is made,
    and its lease claimed, by whichever node reaches it first, a third of them each."""
    return hashlib.sha256(f"{node_id}/{label}".encode()).digest()


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


def _wait_for_work(
    store: StateStore,
    runner: JobRunner,
    report: RunReport,
    stop: threading.Event,
    poll_interval: float,
    outage: StoreOutage,
) -> bool:
    """A --follow node whose run of a feed's job ended waits until `runs_again` says so. False once the node
    stops. A run the store failed runs again after the store's wait (`StoreOutage`)."""
    if report.status == RunOutcome.STORE_UNAVAILABLE:  # run again once the store's wait is over
        return outage.wait(runner.label, report.error, stop)
    seen, ran = runner.latest, runner.job_id
    feed, version = runner.feed.name, runner.feed.version
    if ran is None:  # refused before it looked at a job: a job made from now on is new
        with store.reading() as conn:
            ran = getattr(jobs.newest_job(conn, feed, version), "job_id", None)
    while not stop.wait(poll_interval):
        if runner.left_version:  # the project's version of the feed is another: its own runner runs it
            return False
        with store.reading() as conn:
            job = jobs.newest_job(conn, feed, version)
        if runs_again(job, ran, report.status == RunOutcome.ERROR, runner.latest is not seen):
            return True
    return False


def _leave(store: StateStore, node: Membership, runner: JobRunner, report: RunReport | None) -> None:
    """A run of a feed's job on this node ended: its spans are placed elsewhere at the coordinator's next
    step; a feed this node refused (or failed to start) is not worked here until its copy changes."""
    with store.transaction() as conn:
        if report is not None and report.job_id is not None and not node.lost.is_set():
            spans.boundary(conn, node.node.node_id, report.job_id, release=True)
        refused = report is None or report.status == RunOutcome.ERROR
        if refused and runner.earlier is None:
            nodes.stop_working(conn, node.node, runner.feed.name)


def _start_working(store: StateStore, node: Membership, runner: JobRunner) -> jobs.Job | None:
    """This node works the feed again: the feed's newest job, which it takes its part in."""
    with store.transaction() as conn:
        nodes.start_working(conn, node.node, runner.feed.name)
        return jobs.newest_job(conn, runner.feed.name, runner.feed.version)


def _store_step(step, label: str, stop: threading.Event, outage: StoreOutage):
    """`step()`, a store step of a --follow node's work on one feed between its runs, tried again while the
    store is busy or away (`StoreOutage`) rather than ending the feed's thread, which would leave the feed
    unrun on the node: 500 feeds starting at once on SQLite waited past the pool's timeout for a connection.
    None once the node stops (a node leaving releases all its spans itself)."""
    while True:
        try:
            done = step()
        except Exception as exc:
            cause = store_failure(exc)
            if not cause:
                raise
            if not outage.wait(label, cause, stop):
                return None
            continue
        outage.worked()
        return done


def runs_again(job: jobs.Job | None, ran: int | None, refused: bool, copy_changed: bool) -> bool:
    """Whether a --follow node runs its feed again, after its run of job `ran` ended: when the feed's newest
    `job` runs and this node can take its part, that is, another job (made by `run --new-job`), or the same
    one unless this node refused it (its project's copy could not run it) and still has that copy. A job
    paused and resumed is run again however the run saw it end: the run may have ended as its coordinator
    saw the pause, before the node looked at the job's status, and the spans it holds would stand still.
    With no job, a new copy of the project may make one."""
    if job is None:
        return copy_changed
    if job.status != JobStatus.RUNNING:
        return False
    return job.job_id != ran or not refused or copy_changed


def _take(changed, runners: list[JobRunner], store: StateStore, log) -> list[tuple[Project, CompiledFeed, int]]:
    """The project changed under this --follow node (`changed`; None: it did not). Returns the feeds whose
    version is new to the node, with when the node loaded them: it runs their jobs beside those of the versions
    before (`runner.take`)."""
    if changed is None:
        return []
    loaded = loaded_now(store)
    for runner in runners:
        runner.take(changed.project, changed.feeds.get(runner.feed.name), loaded)
    versions = {(r.feed.name, r.feed.version) for r in runners}  # one runner of a job on a node, at most
    feeds = {r.feed.name for r in runners}
    new = []
    for name, compiled in sorted(changed.feeds.items()):
        if compiled.feed.sink is None:
            continue
        if name not in feeds:
            log(f"{name}: new in the project; a node started with it runs it", event="feed_added", feed=name)
        elif (name, compiled.feed.version) not in versions:
            log(
                f"{name}: version {compiled.feed.version} is new; its job runs beside the version before",
                event="feed_version_added",
                feed=name,
                version=compiled.feed.version,
            )
            new.append((changed.project, compiled, loaded))
    return new


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


def _run_one(runner: JobRunner) -> RunReport:
    try:
        return runner.run()
    except RunError as exc:
        return RunReport(runner.label, None, RunOutcome.ERROR, note=str(exc), error=str(exc))
    except STORE_ERRORS as exc:  # busy or away while the job started (many feeds starting at once on SQLite)
        text = store_failure(exc)
        return RunReport(runner.label, None, RunOutcome.STORE_UNAVAILABLE, note=text, error=text)
    except Exception as exc:  # never lose one feed's report, nor stop the others, over an unexpected error
        text = f"{type(exc).__name__}: {first_line(exc)}"
        return RunReport(runner.label, None, RunOutcome.ERROR, note=text, error=text)
