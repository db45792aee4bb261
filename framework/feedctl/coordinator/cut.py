"""What a coordinator step cuts, decided from what the step read, with no I/O: the scans first (`scans`: the
initial scan, or each table added in place), then the batches of changes (`decide`) that keep
`batches_ahead` of them waiting, the one a table's key change starts, time alone moving on when nothing is
due, and a schema change the feed cannot run past. `JobCoordinator` reads the facts and applies both
decisions in one transaction."""

from __future__ import annotations

from dataclasses import dataclass, field

from feedctl.coordinator import batch_plan
from feedctl.job.key_change import KeyChange
from feedctl.job.table_change import TableChange
from feedctl.options import SchemaChangeAction
from feedctl.state.event_times import Recorded
from feedctl.units import Hlc


@dataclass(frozen=True)
class CutFacts:
    after: dict[str, int]  # each table cut's last version in a batch (tables waiting for their scan left out)
    floor: Hlc  # the newest target cut, or the high-water mark: every new batch is above it
    pending: int  # batches cut that not every span has emitted
    waiting: list[Recorded]  # versions recorded and not yet cut, of the tables in `after`
    closed: Hlc  # no version not yet seen can get an event timestamp at or below it
    batches_ahead: int
    batch_rows: int
    batch_bytes: int | None
    end_time: Hlc | None = None
    # (table, version) -> what the job does at the version changing the table's schema
    schema_changes: dict[tuple[str, int], SchemaChangeAction] = field(default_factory=dict)
    rekey: KeyChange | None = None  # a key change project.yml asks for, at its version
    policy: SchemaChangeAction = SchemaChangeAction.BACKFILL  # schema_change_policy, a key change's too


@dataclass(frozen=True)
class Cut:
    target: Hlc
    ranges: dict[str, tuple[int, int]]
    schema_changes: dict[str, str]
    rekey: KeyChange | None = None  # the key change this batch starts: its table's spans are laid out anew


@dataclass(frozen=True)
class CutDecision:
    batches: tuple[Cut, ...]
    time_only: Hlc | None  # nothing waits and no change is due: the high-water mark moves to it alone
    blocked: tuple[str, int] | None  # a change the feed cannot run past, every batch before it emitted


def decide(facts: CutFacts) -> CutDecision:
    after, floor, rekey = dict(facts.after), facts.floor, facts.rekey
    changes = dict(facts.schema_changes)
    batches: list[Cut] = []
    time_only = None
    while facts.pending + len(batches) < facts.batches_ahead:
        waits = bool(facts.pending or batches)
        if rekey is not None:  # cut once every batch before it is emitted: the table's spans change
            changes[(rekey.table, rekey.version)] = SchemaChangeAction.WAIT if waits else facts.policy
        plan = batch_plan.cut(
            after,
            [r for r in facts.waiting if r.version > after[r.table]],
            floor,
            facts.closed,
            facts.batch_rows,
            facts.end_time,
            facts.batch_bytes,
            changes,
        )
        if plan is None or not plan.ranges:
            time_only = plan.target if plan is not None and not waits else None
            break
        starts = rekey if rekey is not None and plan.ranges.get(rekey.table, (0, -1))[1] == rekey.version else None
        batches.append(Cut(plan.target, plan.ranges, plan.schema_changes, starts))
        if starts is not None:
            rekey = None
        after.update({t: b for t, (_, b) in plan.ranges.items()})
        floor = plan.target
        # the job stops at this change: nothing after it is cut
        if SchemaChangeAction.STOP in plan.schema_changes.values():
            break
    blocked = [(t, v) for (t, v), act in changes.items() if act == SchemaChangeAction.FAIL and v == after.get(t, v) + 1]
    nothing_waits = not facts.pending and not batches
    return CutDecision(tuple(batches), time_only, blocked[0] if blocked and nothing_waits else None)


@dataclass(frozen=True)
class ScanFacts:
    tables: list[str]  # the job's tables now
    positions: dict[str, int]  # each table's version the job follows it from
    initial: bool  # the initial scan is due: asked for, not done, not yet cut
    initial_running: bool  # the initial scan is cut and not yet emitted by every span
    unscanned: list[TableChange]  # tables added in place whose scan is not cut
    start: Hlc  # the job's start: the initial scan's event timestamp
    floor: Hlc  # above every batch cut and every version recorded: a scan of an added table is above it
    closed: Hlc


@dataclass(frozen=True)
class Scan:
    target: Hlc
    ranges: dict[str, tuple[int, int]]  # table -> (-1, the version scanned)
    added: TableChange | None = None  # the table added in place it scans (None: the initial scan)


@dataclass(frozen=True)
class ScanDecision:
    scans: tuple[Scan, ...]
    waits: frozenset[str]  # tables added while the initial scan is emitted: cut after their own scan


def scans(facts: ScanFacts) -> ScanDecision:
    """The scans a step cuts before any batch of changes: the initial scan at the job's start (tables added
    before it scanned with the others); or each table added in place, alone in a batch at an event timestamp
    above everything cut or recorded before, so that none of its rows sorts below a resolved timestamp."""
    if facts.initial:
        return ScanDecision((Scan(facts.start, {t: (-1, facts.positions[t]) for t in facts.tables}),), frozenset())
    if facts.initial_running:
        return ScanDecision((), frozenset(c.table for c in facts.unscanned))
    out, floor = [], facts.floor
    for change in facts.unscanned:
        at = facts.closed if facts.closed > floor else Hlc(floor.wall, floor.logical + 1)
        out.append(Scan(at, {change.table: (-1, change.version)}, change))
        floor = at
    return ScanDecision(tuple(out), frozenset())
