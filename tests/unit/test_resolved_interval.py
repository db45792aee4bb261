"""When a resolved timestamp is due, and the grid a node's steady jobs tick on (`coordinator/resolved.py`)."""

from __future__ import annotations

from feedctl.coordinator import resolved
from feedctl.options import resolve
from feedctl.units import Hlc


def test_ticks_of_one_interval_fall_on_the_same_instants_whenever_their_jobs_became_steady():
    firsts = {resolved.next_tick(1.0, became + 1.0) for became in (100.02, 100.4, 100.97)}
    assert firsts == {102.0}  # the first whole second at least an interval after each
    assert resolved.next_tick(1.0, 102.0) == 102.0  # an instant on the grid is its own
    assert resolved.next_tick(0.5, 101.2) == 101.5
    assert resolved.next_tick(0.0, 101.234) == 101.234  # no interval: no grid


def test_a_tick_on_the_grid_is_due_one_interval_after_the_last():
    options = resolve({"resolved": "1s", "min_checkpoint_frequency": "1s"}, None, False)
    last, mark = Hlc(100 * 10**9), Hlc(101 * 10**9)
    assert resolved.due(options, mark, last, 101.0, 102.0 + resolved.GRID_SLACK)
    assert not resolved.due(options, mark, last, 101.0, 101.5)
    assert not resolved.due(options, last, last, 101.0, 103.0)  # the mark has not moved past it
