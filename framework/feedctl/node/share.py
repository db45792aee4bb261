"""What a node emits next of a job: the next batch its spans have not emitted, read from the job at once with
everything it is emitted under (`Batch`). A node reads the batch's keys and options from the job at every
batch, never from its own copy of the project: a key change or an in-place option change recorded by any node
applies from its batch on."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection

from feedctl.job import table_change
from feedctl.job.definition import JobDefinition, definition_of
from feedctl.job.key_change import Key
from feedctl.options import Options
from feedctl.source.delta import DeltaSource
from feedctl.source.spans import Regions
from feedctl.source.stage import Layout
from feedctl.source.stage_ahead import NextBatch
from feedctl.state import batch_intents, event_times, jobs, spans
from feedctl.state.batch_intents import Intent, IntentKind
from feedctl.state.event_times import Recorded

MAX_CATCH_UP = 8  # batches a span behind the others emits in one Spark job, at most


@dataclass(frozen=True)
class Batch:
    """One emit of this node: the batch its spans have not emitted and those a catch-up adds (`intents`, each
    with its tables' event timestamps), this node's spans of each table, the options the batch is emitted
    under, how each table's rows are placed in spans, and the batch after it, to stage meanwhile."""

    intents: tuple[Intent, ...]
    recorded: tuple[dict[str, list[Recorded]], ...]
    share: dict[str, list[int]]
    options: Options
    layouts: dict[str, Layout]
    following: NextBatch | None = None

    @property
    def first(self) -> Intent:
        return self.intents[0]

    @property
    def last(self) -> Intent:
        return self.intents[-1]

    @property
    def spans(self) -> list[tuple[str, int]]:
        return [(t, s) for t, ss in self.share.items() for s in ss]

    def parts(self) -> list[tuple[Intent, dict[str, list[Recorded]]]]:
        return list(zip(self.intents, self.recorded))


@dataclass(frozen=True)
class Pending:
    """A job as one snapshot had it: its row, its spans, its batches pending (cut, not yet emitted by every
    span) by number, and the event timestamps of the versions of each table they read, in order."""

    job: jobs.Job
    spans: list[spans.Span]
    intents: dict[int, Intent]
    versions: dict[str, list[Recorded]]

    def recorded_of(self, intent: Intent) -> dict[str, list[Recorded]]:
        """The event timestamps of the versions one of its pending intents reads, per table (none for a scan)."""
        if intent.kind != IntentKind.CHANGES:
            return {}
        return {t: [r for r in self.versions.get(t, ()) if a < r.version <= b] for t, (a, b) in intent.ranges.items()}


def pending(conn: Connection, job_ids: list[int]) -> list[Pending | None]:
    """What a node reads of its jobs before emitting each one's next batch, for many jobs in one snapshot and a
    few statements whatever their number, in order (None: no such job): a commit read by 500 feeds was
    otherwise thousands of statements."""
    found = jobs.get_jobs(conn, job_ids)
    every = spans.of_jobs(conn, list(found))
    intents = batch_intents.pending_of(conn, list(found))
    versions = event_times.recorded_in(conn, intents)
    return [Pending(found[j], every[j], intents[j], versions.get(j, {})) if j in found else None for j in job_ids]


def hands_over(every: list[spans.Span], node: str) -> bool:
    """Whether one of this node's spans of the job (`every`: its spans, read in a snapshot) is bound for another
    node: it goes there at this boundary, in a write transaction, before any batch is emitted here. Only then
    does a node take a write lock to look for its batch (SQLite's is one for the whole store, which a node's
    every feed polls): the batch is looked for in a snapshot (`pending`)."""
    return any(s.node == node and s.moving_to is not None for s in every)


def next_batch(
    pending: Pending,
    node: str,
    sources: dict[str, DeltaSource],
    counts: dict[str, int],
    declared: dict[str, Key],
    has_query: bool,
) -> Batch | None:
    """The next batch this node's spans have to emit of the job as `pending` read it in one snapshot (None:
    nothing to do). Spans behind other spans of the job (moved from a dead node, or on a slow one) catch up:
    every batch the others emitted comes with it, in one Spark job (changes only, under the same options, and
    no CDC query, whose tasks could not keep a span's batches in order). Spans bound for another node go there
    first: no batch of this node is in flight (`spans.boundary`, before). `counts`: each table's spans (per
    region for a regional-by-row table). What the snapshot had of the spans it emits holds until they record
    the batch, which `spans.emitted` refuses for a span moved meanwhile."""
    every = pending.spans
    mine = [s for s in every if s.node == node]
    if not mine:
        return None
    seq = min(s.batch_seq for s in mine) + 1
    intent = pending.intents.get(seq)
    if intent is None:
        return None
    definition = definition_of(pending.job)
    table_change.check_sources(definition, sources)
    options = definition.options_at(seq)
    intents = [intent]
    if intent.kind == IntentKind.CHANGES and not intent.schema_changes and not has_query:
        for later in range(seq + 1, min(max(s.batch_seq for s in every), seq + MAX_CATCH_UP - 1) + 1):
            found = pending.intents.get(later)
            if (
                found is None
                or found.kind != IntentKind.CHANGES
                or found.schema_changes
                or definition.options_at(later) != options
            ):
                break
            intents.append(found)
    share: dict[str, list[int]] = {}
    for s in mine:
        if s.batch_seq == seq - 1:
            share.setdefault(s.table, []).append(s.span)
    layouts = _layouts(definition, every, declared, counts)
    following = pending.intents.get(intents[-1].batch_seq + 1)
    return Batch(
        tuple(intents),
        tuple(pending.recorded_of(i) for i in intents),
        share,
        options,
        layouts,
        NextBatch(following.batch_seq, following.ranges, pending.recorded_of(following), share, layouts)
        if following is not None and following.kind == IntentKind.CHANGES
        else None,
    )


def _layouts(
    definition: JobDefinition, every: list[spans.Span], declared: dict[str, Key], counts: dict[str, int]
) -> dict[str, Layout]:
    """Each table's key and spans as the job has them now: a key change recorded by the coordinator applies
    from its batch on (cut once every batch before it was emitted); a batch's regions have spans before it is
    cut."""
    fills: dict[str, dict[int, tuple[list[str], tuple[str, ...]]]] = {}
    for c in definition.key_changes:
        if c.filled:
            fills.setdefault(c.table, {})[c.version] = (list(c.before.primary_key), c.filled)
    layouts = {}
    for table, key in definition.keys_in_force(declared).items():
        regions = (
            Regions.of_spans(key.region_column, counts[table], [(s.span, s.home) for s in every if s.table == table])
            if key.region_column
            else None
        )
        layouts[table] = Layout(list(key.primary_key), regions, fills.get(table, {}))
    return layouts
