"""`feedctl test`'s judgement of emitted messages against a test's expectations, without Spark."""

from __future__ import annotations

from feedctl.unit_tests.compare import differences
from feedctl.unit_tests.harness import Emitted
from feedctl.unit_tests.spec import Expected

EMITTED = [
    Emitted([1], {"id": 1, "amount": "12.50", "tags": ["a"]}, None, "1.0"),
    Emitted([1], None, {"id": 1, "amount": "12.50", "tags": ["a"]}, "2.0"),
]


def test_messages_as_expected_numbers_as_yaml_writes_them():
    expected = (Expected([1], {"id": 1, "amount": 12.5, "tags": ["a"]}), Expected([1], None, {"id": 1}, False))
    assert differences(expected, EMITTED) == []


def test_the_first_difference_is_named_and_the_diff_shows_it_alone():
    expected = (
        Expected([1], {"id": 1, "amount": 12.5, "tags": ["b"]}),
        Expected([1], None, {"id": 1, "amount": 12.5, "tags": ["a"]}, True),
    )
    said = differences(expected, EMITTED)
    assert said[0] == "message 1 differs: after.tags: expected ['b'], emitted ['a']"
    changed = [line for line in said[1:] if line[:1] in "+-"]
    assert len(changed) == 2 and '"amount": "12.50"' in changed[0]  # equal values shown as emitted


def test_messages_missing_or_more_than_expected():
    assert differences((Expected([1], {"id": 1, "amount": 12.5, "tags": ["a"]}),), EMITTED)[0] == (
        "1 message was emitted that the test does not expect"
    )
    assert differences((Expected([1], {"id": 1, "amount": 12.5, "tags": ["a"]}),) * 3, EMITTED[:1])[0] == (
        "2 expected messages were not emitted"
    )
    assert differences((Expected([1], {"id": 1, "amount": 12.5, "tags": ["a"]}, {"id": 2}, True),), EMITTED[:1])[
        0
    ].startswith("message 1 differs: before: expected {'id': 2}, emitted None")
