"""What a coordinator step cuts, decided from plain facts with no store, no Delta table and no Spark."""

from __future__ import annotations

from dataclasses import replace

from feedctl.coordinator.cut import CutFacts, ScanFacts, decide, scans
from feedctl.job.key_change import Key, KeyChange
from feedctl.job.table_change import TableChange, TableOp
from feedctl.state.event_times import Recorded
from feedctl.units import Hlc


def recorded(table: str, version: int, wall: int, rows: int = 10) -> Recorded:
    return Recorded(table, version, wall, Hlc(wall), rows, rows * 100)


FACTS = CutFacts(
    after={"a": 3, "b": 7},
    floor=Hlc(100),
    pending=0,
    waiting=[recorded("a", 4, 110), recorded("b", 8, 120), recorded("a", 5, 130)],
    closed=Hlc(200),
    batches_ahead=2,
    batch_rows=15,
    batch_bytes=None,
)


def test_batches_are_cut_in_event_timestamp_order_until_enough_wait():
    decided = decide(FACTS)
    assert [(b.target, b.ranges) for b in decided.batches] == [
        (Hlc(110), {"a": (3, 4)}),
        (Hlc(120), {"b": (7, 8)}),
    ]  # 15 rows a batch, two batches ahead: version 5 of a waits for the next step
    assert decided.time_only is None and decided.blocked is None


def test_nothing_is_cut_past_what_already_waits():
    assert decide(replace(FACTS, pending=2)).batches == ()
    assert [b.ranges for b in decide(replace(FACTS, pending=1)).batches] == [{"a": (3, 4)}]


def test_with_nothing_waiting_time_alone_moves_to_the_closed_timestamp():
    decided = decide(replace(FACTS, waiting=[]))
    assert decided.batches == () and decided.time_only == Hlc(200)
    assert decide(replace(FACTS, waiting=[], pending=1)).time_only is None  # a batch is still to be emitted


def test_a_key_change_waits_for_every_batch_before_it_then_starts_its_own():
    change = KeyChange("a", 4, Key(("id",)), Key(("region", "id"), "region"), ("region",))
    waiting = replace(FACTS, rekey=change)
    assert decide(replace(waiting, pending=1)).batches == ()  # its version waits: nothing at or after it is cut
    [first, *_] = decide(waiting).batches
    assert first.ranges == {"a": (3, 4)} and first.rekey == change and first.schema_changes == {"a": "backfill"}
    later = replace(waiting, waiting=[recorded("b", 8, 105), *FACTS.waiting])
    batches = decide(later).batches  # b's earlier version is cut alone first; the key change then waits
    assert [b.ranges for b in batches] == [{"b": (7, 8)}] and batches[0].rekey is None


def test_a_change_the_feed_cannot_run_past_is_said_once_everything_before_it_is_emitted():
    blocked = replace(FACTS, schema_changes={("a", 5): "fail"})
    decided = decide(blocked)
    assert [b.ranges for b in decided.batches] == [{"a": (3, 4)}, {"b": (7, 8)}] and decided.blocked is None
    emitted = replace(blocked, after={"a": 4, "b": 8}, waiting=[recorded("a", 5, 130)])
    assert decide(emitted).batches == () and decide(emitted).blocked == ("a", 5)


def test_a_change_the_job_stops_at_is_the_last_version_cut():
    stops = replace(FACTS, schema_changes={("b", 8): "stop"}, batches_ahead=5, batch_rows=1_000)
    [batch] = decide(stops).batches
    assert batch.target == Hlc(120) and batch.ranges == {"a": (3, 4), "b": (7, 8)}
    assert batch.schema_changes == {"b": "stop"}


SCAN_FACTS = ScanFacts(
    tables=["a", "b"],
    positions={"a": 3, "b": 7},
    initial=False,
    initial_running=False,
    unscanned=[],
    start=Hlc(50),
    floor=Hlc(100),
    closed=Hlc(200),
)


def test_the_initial_scan_reads_every_table_at_the_jobs_start():
    [scan] = scans(replace(SCAN_FACTS, initial=True)).scans
    assert (scan.target, scan.ranges, scan.added) == (Hlc(50), {"a": (-1, 3), "b": (-1, 7)}, None)


def test_a_table_added_is_scanned_alone_above_everything_before_it():
    added = [TableChange("c", TableOp.ADDED, 4, scan=True), TableChange("d", TableOp.ADDED, 9, scan=True)]
    decided = scans(replace(SCAN_FACTS, unscanned=added))
    assert [(s.target, s.ranges) for s in decided.scans] == [(Hlc(200), {"c": (-1, 4)}), (Hlc(200, 1), {"d": (-1, 9)})]
    late = scans(replace(SCAN_FACTS, unscanned=added[:1], closed=Hlc(90)))  # the clock behind what was cut
    assert [s.target for s in late.scans] == [Hlc(100, 1)]


def test_a_table_added_while_the_initial_scan_is_emitted_waits_for_it():
    added = [TableChange("c", TableOp.ADDED, 4, scan=True)]
    decided = scans(replace(SCAN_FACTS, unscanned=added, initial_running=True))
    assert decided.scans == () and decided.waits == {"c"}
