"""What a node emits next of a job: the next batch its spans have not emitted, with the job's keys and
options as they stand for that batch. A node reads both from the job at every batch, never from its own copy
of the project: a key change or an in-place option change recorded by any node applies from its batch on."""

from __future__ import annotations

from feedctl.job import table_change
from feedctl.job.definition import JobDefinition
from feedctl.job.key_change import Key
from feedctl.node.execute import FeedPlan
from feedctl.source.spans import Regions
from feedctl.state import jobs, progress, spans
from feedctl.state.progress import IntentKind

MAX_CATCH_UP = 8  # batches a span behind the others emits in one Spark job, at most


def next_share(
    conn, job_id: int, node: str, plan: FeedPlan, declared: dict[str, Key], has_query: bool
) -> tuple[list[progress.Intent], dict[str, list[int]]] | None:
    """The next batch this node's spans have to emit, and those spans per table (None: nothing to do);
    `plan` is set to the batch's keys and options. Spans behind other spans of the job (moved from a dead
    node, or on a slow one) catch up: every batch the others emitted comes with it, in one Spark job
    (changes only, under the same options, and no CDC query, whose tasks could not keep a span's batches in
    order). Spans bound for another node go there first: no batch of this node is in flight."""
    spans.boundary(conn, node, job_id)
    every = spans.of_job(conn, job_id)
    definition = jobs.get_job(conn, job_id).definition
    table_change.check_sources(definition, plan.sources)
    follow_keys(definition, plan, every, declared)
    mine = [s for s in every if s.node == node]
    if not mine:
        return None
    seq = min(s.batch_seq for s in mine) + 1
    intent = progress.intent(conn, job_id, seq)
    if intent is None:
        return None
    plan.options = definition.options_at(seq)
    intents = [intent]
    if intent.kind == IntentKind.CHANGES and not intent.schema_changes and not has_query:
        for later in range(seq + 1, min(max(s.batch_seq for s in every), seq + MAX_CATCH_UP - 1) + 1):
            found = progress.intent(conn, job_id, later)
            if (
                found is None
                or found.kind != IntentKind.CHANGES
                or found.schema_changes
                or definition.options_at(later) != plan.options
            ):
                break
            intents.append(found)
    share: dict[str, list[int]] = {}
    for s in mine:
        if s.batch_seq == seq - 1:
            share.setdefault(s.table, []).append(s.span)
    return intents, share


def follow_keys(definition: JobDefinition, plan: FeedPlan, every: list[spans.Span], declared: dict[str, Key]) -> None:
    """Each table's key and spans as the job has them now: a key change recorded by the coordinator
    applies from its batch on (cut once every batch before it was emitted)."""
    for table, key in definition.keys_in_force(declared).items():
        plan.keys[table] = list(key.primary_key)  # the stager's too: one dict
        column = key.region_column
        if column:  # a batch's regions have spans before it is cut
            plan.stager.regions[table] = Regions.of_spans(
                column, plan.spans[table], [(s.span, s.home) for s in every if s.table == table]
            )
        else:
            plan.stager.regions.pop(table, None)
    plan.stager.fills = {
        (c.table, c.version): (list(c.before.primary_key), c.filled) for c in definition.key_changes if c.filled
    }
