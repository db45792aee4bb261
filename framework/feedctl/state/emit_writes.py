"""What a node records of the batches its spans emitted, for many jobs in one transaction, in a few statements
whatever the number of jobs: the spans moved past each batch (`spans.emitted` does it for one job) and each
batch's result added to what it recorded. A statement or three a job, a commit read by a hundred feeds was
hundreds of statements in one transaction, each letting the interpreter go to another of the node's hundreds of
threads, while every feed's next batch waited for that transaction.

Functions take an open transaction."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import and_, case, select, update
from sqlalchemy.engine import Connection

from feedctl.state.many_rows import among, fetch, updated
from feedctl.state.schema import CHUNK, batch_intents
from feedctl.state.schema import span_frontiers as spans_table
from feedctl.units import Hlc


@dataclass(frozen=True)
class Emitted:
    """A node's spans `keys` of a job emitted the batches after `after` up to `batch_seq` (whose target is
    `target`), with what each batch wrote (`results`, by batch)."""

    job_id: int
    node: str
    keys: list[tuple[str, int]]
    batch_seq: int
    target: Hlc
    after: int
    results: dict[int, dict]


def record(conn: Connection, emitted: list[Emitted]) -> list[list[tuple[str, int]]]:
    """Each record's spans moved past its batch, and its results added; per record, in order, the spans it still
    owned at `after` (`spans.emitted`: the others were moved, or recorded first by another process)."""
    done: list[list[tuple[str, int]]] = [[] for _ in emitted]
    for round_ in _rounds(emitted):
        by_node: dict[str, dict[int, int]] = defaultdict(dict)
        for job_id, i in round_.items():
            by_node[emitted[i].node][job_id] = i
        for node, by_job in by_node.items():
            _spans(conn, node, by_job, emitted, done)
    _results(conn, emitted)
    return done


def _rounds(emitted: list[Emitted]) -> list[dict[int, int]]:
    """The records in rounds holding one record of a job each (job id → its index): a statement sets each job's
    spans one way."""
    rounds: list[dict[int, int]] = []
    for i, e in enumerate(emitted):
        round_ = next((r for r in rounds if e.job_id not in r), None)
        if round_ is None:
            round_ = {}
            rounds.append(round_)
        round_[e.job_id] = i
    return rounds


def _spans(
    conn: Connection, node: str, by_job: dict[int, int], emitted: list[Emitted], done: list[list[tuple[str, int]]]
) -> None:
    """One node's spans of jobs (one record each, `by_job`: its index), moved past their batches, a statement per
    few hundred spans; those it still owned go to `done` at the record's index."""
    for part in _parts([(job_id, emitted[i].keys) for job_id, i in by_job.items()], CHUNK // 4):
        records = {job_id: emitted[by_job[job_id]] for job_id, _ in part}
        keys = [(job_id, table, span) for job_id, spans in part for table, span in spans]
        c = spans_table.c
        where = and_(
            among(conn, (c.job_id, c.table_name, c.span), keys),
            c.node_id == node,
            c.batch_seq == case({j: e.after for j, e in records.items()}, value=c.job_id),
        )
        values = {
            "batch_seq": case({j: e.batch_seq for j, e in records.items()}, value=c.job_id),
            "wall": case({j: e.target.wall for j, e in records.items()}, value=c.job_id),
            "logical": case({j: e.target.logical for j, e in records.items()}, value=c.job_id),
        }
        for job_id, table, span in updated(conn, spans_table, where, values, (c.job_id, c.table_name, c.span)):
            done[by_job[job_id]].append((table, span))


def _results(conn: Connection, emitted: list[Emitted]) -> None:
    """Each batch's results added to what it recorded (the nodes' shares of it), its row locked meanwhile."""
    added: dict[tuple[int, int], dict] = {}
    for e in emitted:
        for batch_seq, result in e.results.items():
            total = added.setdefault((e.job_id, batch_seq), {})
            for name, value in result.items():
                total[name] = total.get(name, 0) + value
    keys = list(added)
    for at in range(0, len(keys), CHUNK // 4):
        part = keys[at : at + CHUNK // 4]
        rows = fetch(
            conn,
            select(batch_intents.c.job_id, batch_intents.c.batch_seq, batch_intents.c.result)
            .where(among(conn, (batch_intents.c.job_id, batch_intents.c.batch_seq), part))
            .order_by(batch_intents.c.job_id, batch_intents.c.batch_seq)  # locked in one order on every node
            .with_for_update(),
        )  # nodes add their shares at once: none is lost
        if not rows:
            continue
        totals = {}
        for job_id, batch_seq, result in rows:
            total = json.loads(result or "{}")
            for name, value in added[job_id, batch_seq].items():
                total[name] = total.get(name, 0) + value
            totals[job_id, batch_seq] = json.dumps(total, sort_keys=True)
        conn.execute(
            update(batch_intents)
            .where(among(conn, (batch_intents.c.job_id, batch_intents.c.batch_seq), list(totals)))
            .values(
                result=case(
                    *[
                        (and_(batch_intents.c.job_id == j, batch_intents.c.batch_seq == s), text)
                        for (j, s), text in totals.items()
                    ],
                    else_=batch_intents.c.result,
                )
            )
        )


def _parts(jobs: list[tuple[int, list]], spans: int) -> list[list[tuple[int, list]]]:
    """The jobs in parts of about `spans` spans (a job's spans never split)."""
    parts, part, size = [], [], 0
    for job in jobs:
        if part and size + len(job[1]) > spans:
            parts.append(part)
            part, size = [], 0
        part.append(job)
        size += len(job[1])
    if part:
        parts.append(part)
    return parts
