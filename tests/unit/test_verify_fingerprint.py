"""verify's fingerprint: the newest message of each key against the table. A column whose type was widened
is no schema change event (no backfill), so a message written before it holds the value as the narrower
type wrote it: the same value, not a mismatch; any other difference is one."""

from __future__ import annotations

import json

from feedctl.units import Hlc
from feedctl.verify.checks import Report, Walk, check_fingerprint

ROW = {"id": 1, "d": "1.0", "f": 3.4000000953674316, "t": "2024-09-09T00:00:00", "s": {"n": "2.50"}}
OLD = {"id": 1, "d": 1, "f": 3.4, "t": "2024-09-09", "s": {"n": 2.5}}


def _findings(message: dict, widened: frozenset[str]) -> list[dict]:
    walk, report = Walk(), Report("f", 1, "running", "file://x", Hlc(0), Hlc(10))
    walk.latest[("t", "[1]")] = (Hlc(5), json.dumps(message, sort_keys=True))
    check_fingerprint(report, walk, "t", {"[1]": json.dumps(ROW, sort_keys=True)}, False, widened=widened)
    return report.findings["fingerprint"].examples


def test_a_message_from_before_a_widening_is_the_row_as_its_narrower_type_wrote_it():
    assert _findings(OLD, frozenset({"d", "f", "t", "s"})) == []


def test_without_the_widening_or_with_another_value_it_is_a_mismatch():
    assert len(_findings(OLD, frozenset())) == 1
    assert len(_findings({**OLD, "d": 2}, frozenset({"d", "f", "t", "s"}))) == 1
    assert len(_findings({**OLD, "f": 3.5}, frozenset({"d", "f", "t", "s"}))) == 1
    assert len(_findings({**OLD, "t": "2024-09-10"}, frozenset({"d", "f", "t", "s"}))) == 1
    assert len(_findings({**OLD, "id": 2}, frozenset({"d", "f", "t", "s"}))) == 1  # not a widened column
