"""What a node tells of a batch (or a catch-up's batches) it emitted: one log line, the metrics
(`feedctl.metrics.changefeed`) from the counts its Spark tasks returned, and its record in the state store
(`recorded`: on a --follow node, with its other feeds' records in one transaction)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from feedctl.metrics import changefeed as metrics
from feedctl.node.batch_progress import batches_text
from feedctl.node.execute import BatchResult
from feedctl.options import Options, SchemaChangeAction
from feedctl.state import batch_intents, spans
from feedctl.state.batch_intents import Intent, IntentKind
from feedctl.state.event_times import Recorded


def kind(intent: Intent, catching_up: bool) -> str:
    if catching_up:
        return "catching up"
    if SchemaChangeAction.BACKFILL in intent.schema_changes.values():
        return "backfill"
    return "schema change" if intent.schema_changes else intent.kind


def is_backfill(intent: Intent) -> bool:
    """A scan of whole tables: an initial scan, or a backfill at a schema change."""
    return intent.kind == IntentKind.SCAN or SchemaChangeAction.BACKFILL in intent.schema_changes.values()


def oldest_commit_ns(intents: list[tuple[Intent, dict[str, list[Recorded]]]]) -> int | None:
    """When the oldest change the batches carry was committed; None for scans and backfills, whose rows
    were committed whenever they were."""
    if any(is_backfill(i) for i, _ in intents):
        return None
    return min(
        (r.commit_ns for _, recorded in intents for versions in recorded.values() for r in versions if r.rows),
        default=None,
    )


def tell(
    log,
    feed: str,
    node: str,
    options: Options,
    intents: list[tuple[Intent, dict[str, list[Recorded]]]],
    result: BatchResult,
    spans: int,
) -> None:
    """Said before the batch is recorded as emitted: once it is, the coordinator may checkpoint it and write
    the resolved timestamp that follows, and their lines come after this one."""
    first, last = intents[0][0], intents[-1][0]
    oldest = oldest_commit_ns(intents)
    metrics.batch_emitted(
        options,
        node,
        result.messages,
        result.emitted_bytes,
        result.bytes,
        (time.time_ns() - oldest) / 1e9 if oldest is not None else None,
    )
    log(
        f"{feed}: {batches_text(first.batch_seq, last.batch_seq)} ({kind(first, first is not last)}) "
        f"{result.describe()}; spans at "
        f"{last.target.for_people()}",
        event="batch",
        feed=feed,
        batch=last.batch_seq,
        spans=spans,
        target=str(last.target),
        **result.to_json(),
    )


@dataclass(frozen=True)
class Record:
    """What a node's spans emitted of a job's batches, and what each batch wrote (by batch)."""

    spans: spans.Emitted
    results: dict[int, dict]


def recorded(conn, records: list[Record]) -> list[list[tuple[str, int]]]:
    """Each record's spans moved past its batch and its results added, for many jobs in a few statements; per
    record, in order, the spans its node still owned (`spans.emitted`)."""
    done = spans.emitted(conn, [r.spans for r in records])
    batch_intents.add_results(conn, [(r.spans.job_id, r.results) for r in records])
    return done
