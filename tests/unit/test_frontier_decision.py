"""What the mark takes, decided without a store: the batches every span emitted, in order, and whether the job
ends with them (`coordinator/frontier.py:taken`)."""

from __future__ import annotations

from feedctl.coordinator.frontier import Ending, taken
from feedctl.state.batch_intents import Intent, IntentKind
from feedctl.units import Hlc


def _intent(seq: int, kind=IntentKind.CHANGES, **schema_changes) -> Intent:
    return Intent(seq, kind, Hlc(seq * 10), {"s.t": (seq - 1, seq)}, schema_changes)


PENDING = [_intent(1, IntentKind.SCAN), _intent(2), _intent(3)]


def test_the_mark_takes_the_batches_every_span_emitted_in_order():
    assert [i.batch_seq for i in taken(PENDING, 2, False, None).done] == [1, 2]
    assert taken(PENDING, 3, False, None).ending is None
    assert taken(PENDING, 0, False, None).done == ()
    assert taken(PENDING, None, False, None).done == (), "a job without spans yet takes nothing"


def test_an_initial_scan_only_job_succeeds_with_its_scan_and_nothing_after_it():
    decided = taken(PENDING, 3, True, None)
    assert [i.batch_seq for i in decided.done] == [1] and decided.ending == Ending.SCANNED


def test_a_stop_at_a_schema_change_is_the_last_batch_taken():
    pending = [_intent(1), _intent(2, **{"s.t": "none"}), _intent(3, **{"s.t": "stop"}), _intent(4)]
    decided = taken(pending, 4, False, None)
    assert [i.batch_seq for i in decided.done] == [1, 2, 3] and decided.ending == Ending.SCHEMA_STOP


def test_the_job_ends_with_the_batch_that_reaches_end_time():
    decided = taken(PENDING, 3, False, Hlc(20))
    assert [i.batch_seq for i in decided.done] == [1, 2] and decided.ending == Ending.END_TIME
    assert taken(PENDING, 3, False, Hlc(31)).ending is None
