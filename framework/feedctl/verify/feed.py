"""Verify one job of a feed: gather its definition and recorded timestamps from the state store, the
expected messages from its tables' history, then walk the sink."""

from __future__ import annotations

from dataclasses import replace

from feedctl.diagnostics import UsageError, first_line, no_feed
from feedctl.job.definition import definition_of
from feedctl.job.key_change import Key
from feedctl.job.table_change import TableOp
from feedctl.options import Envelope, Format, InitialScan, Options, SchemaChangePolicy
from feedctl.project.loader import load_project
from feedctl.sinks import naming
from feedctl.sinks.messages import MessageSpec, TableShape
from feedctl.sinks.registry import open_sink
from feedctl.sinks.versioned import at_version
from feedctl.state import batch_intents, checkpoints, event_times, jobs
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from feedctl.verify.checks import Ident, Report, Walk, check_fingerprint, check_missing, walk_sink
from feedctl.verify.history import (
    UNREADABLE,
    Expected,
    TableHistory,
    expected_states,
    row_schema,
    snapshot_states,
    widened,
)
from feedctl.verify.query_eval import QueryError


def _job(store: StateStore, feed: str, job_id: int | None) -> jobs.Job:
    with store.reading() as conn:
        if job_id is None:
            job = jobs.newest_job(conn, feed)
            if job is None:
                raise UsageError(f'feed "{feed}" has no job to verify (feedctl run creates it)')
            return job
        try:
            job = jobs.get_job(conn, job_id)
        except jobs.JobError as exc:
            raise UsageError(str(exc)) from None
    if job.feed != feed:
        raise UsageError(f"job {job_id} belongs to feed {job.feed}, not {feed}")
    return job


def _told(entries, read: list[int], progress):
    """The sink's entries, telling `progress` how many messages were read, every 10,000."""
    for entry in entries:
        yield entry
        before = read[0]
        read[0] += len(getattr(entry, "messages", ()))
        if read[0] // 10_000 > before // 10_000:
            progress(f"{read[0]:,} messages of the sink read")


def _histories(store: StateStore, project, job: jobs.Job) -> list[TableHistory]:
    """Every table the job emitted: those it reads now, those added since its start (followed from their
    version then, scanned at their own event timestamp) and those dropped (up to their last version cut)."""
    out = []
    changes = definition_of(job).table_changes
    scanning = definition_of(job).options.scans
    with store.reading() as conn:
        positions = checkpoints.positions(conn, job.job_id)
        scanned = batch_intents.scans_cut(conn, job.job_id)
        for table in definition_of(job).tables_ever():
            recorded = event_times.recorded_after(conn, job.job_id, table, -1)
            # Recording starts right after the job's start version and never skips one.
            start = recorded[0].version - 1 if recorded else positions[table][0]
            t = project.tables.get(table)
            if t is None:
                raise UsageError(f"job {job.job_id} reads {table}, which project.yml no longer declares")
            declared = Key.of(t.primary_key, t.region_column)
            key = list(definition_of(job).keys_in_force({table: declared})[table].primary_key)
            added = next((c for c in changes if c.table == table and c.op == TableOp.ADDED), None)
            dropped = next((c for c in changes if c.table == table and c.op == TableOp.DROPPED), None)
            event_ts = {r.version: r.event_ts for r in recorded if dropped is None or r.version <= dropped.version}
            # A table dropped before the job's initial scan was cut was never scanned: nothing of it is due.
            at_start = scanning and (dropped is None or table in scanned)
            scanned_at = (added.scan_at if added.scan else None) if added else job.start if at_start else None
            out.append(
                TableHistory(
                    table,
                    t.location,
                    t.storage_options,
                    key,
                    start,
                    event_ts,
                    tuple(c for c in definition_of(job).key_changes if c.table == table),
                    scanned_at,
                    t.changes,
                )
            )
    return out


def _spec(options: Options, sink_options: dict, job: jobs.Job, shapes: dict) -> MessageSpec:
    fmt = options.format
    if fmt not in naming.EXTENSIONS or options.envelope not in (Envelope.WRAPPED, Envelope.BARE):
        raise UsageError(
            f"verify reads JSON, CSV, Parquet and Avro with envelope wrapped or bare; feed {job.feed} "
            f"writes format {fmt}, envelope {options.envelope}"
        )
    if fmt == Format.CSV and definition_of(job).sql:
        raise UsageError(
            f"feed {job.feed} writes CSV through a CDC query: its files name no columns, and verify "
            "reads CSV by the table's own columns"
        )
    scan_only = options.initial_scan == InitialScan.ONLY
    changes = definition_of(job).option_changes
    off = next((c for c in changes if c.was.get("updated") is False), None)
    if (not options.updated or off) and not scan_only:
        raise UsageError(
            f"feed {job.feed} does not set `updated: true`"
            + (f" before batch {off.from_batch} of job {job.job_id}" if off else "")
            + ": its messages carry no timestamp to place them in the tables' history"
        )
    extension = naming.extension(fmt, sink_options["compression"])
    diffs = [c for c in changes if "diff" in c.now]
    first = diffs[0].was["diff"] if diffs else options.diff
    return MessageSpec(
        options.envelope,
        bool(first),
        not scan_only,
        job.start,
        extension,
        sink_options["partition_format"],
        fmt,
        shapes,
        tuple((c.after, bool(c.now["diff"])) for c in diffs),
    )


def verify_feed(
    project_dir, feed: str, job_id: int | None = None, capture: str | None = None, progress=lambda text: None
) -> Report:
    """`capture`: for a webhook sink, the file its endpoint recorded the requests in
    (`feedctl.testing.webhook_capture`);
    `progress(text)`: told what it reads as it goes (a terminal shows it)."""
    project, _ = load_project(project_dir)
    if feed not in project.feeds:
        raise UsageError(no_feed(feed, project.feeds))
    store = StateStore.of_project(project)
    try:
        job = _job(store, feed, job_id)
        progress(f"job {job.job_id}: reading the tables' change history")
        histories = _histories(store, project, job)
    finally:
        store.close()
    definition = definition_of(job)
    options = definition.options
    sink = project.sinks.get(definition.sink)
    sink = at_version(sink, job.version) if sink is not None else None  # a later version's location
    if sink is None or sink.kind not in ("cloudstorage", "kafka", "webhook"):
        raise UsageError(
            f"job {job.job_id} wrote to sink {definition.sink!r}, which is not a cloud storage, "
            "Kafka or webhook sink of this project; verify reads those"
        )
    if sink.kind == "webhook" and capture is None:
        raise UsageError(
            f"sink {sink.name} is a webhook: verify reads what the endpoint received from its capture "
            "file; pass --capture FILE (see feedctl.testing.webhook_capture)"
        )
    reader = open_sink(sink.uri, sink.options, str(project.root))
    sink_options = reader.options
    topics = {reader.topic(h.name, options.full_table_name): h for h in histories}
    shapes = (
        {
            topic: TableShape(h.key, dict(row_schema(h, max(h.event_ts, default=h.start_version))))
            for topic, h in topics.items()
        }
        if options.format in (Format.CSV, Format.AVRO)
        else {}
    )
    spec = _spec(options, sink_options, job, shapes)
    report = Report(feed, job.job_id, job.status, sink.uri_display, job.start, job.high_water)

    # A bare JSON message has no `before`; a Parquet row has it in a column of its own.
    before = (spec.diff or any(d for _, d in spec.diff_changes)) and (
        options.envelope == Envelope.WRAPPED or options.format == Format.PARQUET
    )
    expected: dict[Ident, Expected] = {}
    unjudged: set[tuple[str, Hlc]] = set()
    for topic, history in topics.items():
        try:
            # A scan in progress has emitted some spans' rows: they are expected, the rest not yet due.
            states, unread = expected_states(
                history,
                definition.sql,
                history.scanned_at is not None,
                history.scanned_at or job.start,
                before,
                options,
                (definition.columns or {}).get(history.name),
                options.format == Format.JSON,
            )
        except QueryError as exc:
            raise UsageError(f"feed {feed}: {exc}") from None
        except UNREADABLE as exc:
            raise UsageError(f"feed {feed}: cannot judge table {history.name}: {first_line(exc)}") from None
        unjudged |= {(topic, ts) for ts in unread}
        report.unjudged += [why for _, why in sorted(unread.items())]
        if spec.diff_changes:  # messages carry `before` only while diff was on
            states = [e if spec.at(e.ts).diff else replace(e, before=None) for e in states]
        expected.update(((topic, e.key, e.ts), e) for e in states)

    try:
        streams = reader.read(job.job_id, list(topics), spec, report.add, capture)
    except (OSError, ValueError) as exc:  # a webhook's capture is read at once
        raise UsageError(f"cannot read the capture {capture}: {exc}") from None
    walk, read = Walk(), [0]
    progress(f"job {job.job_id}: {len(expected):,} changes expected; reading the sink")
    for stream in streams:
        walk_sink(report, _told(stream, read, progress), expected, walk, frozenset(unjudged))
    check_missing(report, walk, expected)
    if definition.sql:
        report.fingerprint_note = "not compared: a CDC query's output is not the table"
    else:
        for topic, history in topics.items():
            at = [v for v, ts in history.event_ts.items() if ts <= job.high_water]
            version = max(at, default=history.start_version)
            # Under its newest key: messages from its change on, every row when the change backfilled.
            rekeyed = [c for c in history.key_changes if c.version <= version]
            since = history.event_ts[rekeyed[-1].version] if rekeyed else None
            every = (
                options.schema_change_policy == SchemaChangePolicy.BACKFILL
                if rekeyed
                else history.scanned_at is not None and history.scanned_at <= job.high_water
            )  # its scan emitted
            try:
                truth = snapshot_states(history, version, options.format == Format.JSON)
            except UNREADABLE as exc:
                report.unjudged.append(f"{history.name}: version {version}, the fingerprint's: {first_line(exc)}")
                continue
            check_fingerprint(report, walk, topic, truth, every, since, widened(history, version))
    return report
