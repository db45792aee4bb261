"""Options changed in place: which batch and which event timestamp each setting applies to."""

from __future__ import annotations

import json

from feedctl.job import option_change
from feedctl.job.definition import JobDefinition
from feedctl.job.option_change import OptionChange
from feedctl.options import DEFAULTS, IN_PLACE_OPTIONS, NEW_JOB_REASONS, START_OPTIONS, resolve
from feedctl.sinks.messages import MessageSpec
from feedctl.units import Hlc


def _job(options: dict, *changes: OptionChange) -> JobDefinition:
    """A job of the default options with `options` over them."""
    definition = JobDefinition(tables=("t",), sql=None, options=resolve({}, None, False).with_values(options), sink="s")
    for change in changes:
        definition = definition.with_option_change(change)
    return definition


def test_every_option_is_taken_in_place_or_says_why_it_needs_a_new_job():
    classified = set(IN_PLACE_OPTIONS) | set(NEW_JOB_REASONS) | set(START_OPTIONS)
    assert classified == set(DEFAULTS)
    assert not set(IN_PLACE_OPTIONS) & set(NEW_JOB_REASONS)


def test_only_the_in_place_options_that_differ_are_changed():
    defaults = resolve({}, None, False)
    was, now = option_change.differing(
        defaults.with_values({"diff": False, "resolved": "10s", "format": "json"}),
        defaults.with_values({"diff": True, "resolved": "10s", "format": "parquet"}),
    )
    assert (was, now) == ({"diff": False}, {"diff": True})


def test_a_changed_in_place_option_is_told_as_stored():
    """What an `OptionChange` records is JSON: valued options as their strings, `on_error` among them."""
    defaults = resolve({}, None, False)
    was, now = option_change.differing(defaults, defaults.with_values({"on_error": "pause", "batch_bytes": 1024}))
    assert (was, now) == ({"on_error": "fail", "batch_bytes": 256 * 2**20}, {"on_error": "pause", "batch_bytes": 1024})
    assert type(was["on_error"]) is str and json.dumps(now) == '{"on_error": "pause", "batch_bytes": 1024}'


def test_a_batch_cut_before_a_change_keeps_the_options_it_was_cut_under():
    definition = _job(
        {"diff": False, "resolved": "10s"},
        OptionChange(4, Hlc(300), {"diff": False}, {"diff": True}),
        OptionChange(7, Hlc(600), {"diff": True, "resolved": "10s"}, {"diff": False, "resolved": "1s"}),
    )
    assert (definition.options.diff, definition.options.resolved) == (False, "1s")
    assert [definition.options_at(b).diff for b in (1, 3, 4, 6, 7, 9)] == [
        False,
        False,
        True,
        True,
        False,
        False,
    ]
    assert definition.options_at(6).resolved == "10s"
    assert definition.options_at(9) == definition.options  # a batch after every change: the options now
    # recorded as JSON on the job, read back the same
    assert JobDefinition.from_json(json.loads(json.dumps(definition.to_json()))).option_changes[1] == OptionChange(
        7, Hlc(600), {"diff": True, "resolved": "10s"}, {"diff": False, "resolved": "1s"}
    )


def test_a_change_before_any_batch_applies_to_every_message():
    definition = _job({"diff": False}, OptionChange(1, None, {"diff": False}, {"diff": True}))
    assert definition.options_at(1).diff
    spec = MessageSpec("wrapped", False, True, Hlc(0), ".ndjson", "flat", diff_changes=((None, True),))
    assert spec.at(Hlc(0)).diff


def test_verify_expects_before_only_where_diff_was_on():
    spec = MessageSpec(
        "wrapped", False, True, Hlc(0), ".ndjson", "flat", diff_changes=((Hlc(300), True), (Hlc(600), False))
    )
    assert [spec.at(Hlc(w)).diff for w in (300, 301, 600, 601)] == [False, True, True, False]
    assert spec.at(Hlc(100)) is spec
