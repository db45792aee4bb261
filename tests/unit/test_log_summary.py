"""A node running many feeds tells its routine lines (batches, checkpoints, resolved timestamps) as one summary
line per interval, and everything else as it comes."""

from __future__ import annotations

from feedctl.node.log_summary import LogSummary


def test_routine_lines_become_one_summary_and_the_rest_passes_through():
    said = []
    summary = LogSummary(lambda message, **fields: said.append((message, fields)), every=3600)
    for feed in ("f1", "f2", "f3"):
        summary(f"{feed}: batch 4 emitted", event="batch", feed=feed, messages=10, files=2)
        summary(f"{feed}: checkpoint", event="checkpoint", feed=feed)
    summary("f1: resolved", event="resolved", feed="f1")
    summary("f2: the sink failed; trying again", event="retry", feed="f2")
    assert [m for m, _ in said] == ["f2: the sink failed; trying again"]
    summary.close()
    message, fields = said[-1]
    assert message.startswith("3 feeds in the last ")
    assert message.endswith("3 batches emitted (30 messages in 6 files), 3 checkpoints, 1 resolved timestamp")
    assert fields["event"] == "node_summary" and (fields["batches"], fields["messages"]) == (3, 30)
    summary.close()
    assert len(said) == 2, "nothing new: no line"


def test_a_summary_is_said_once_the_interval_has_passed():
    said = []
    summary = LogSummary(lambda message, **fields: said.append(message), every=0)
    summary("f1: checkpoint", event="checkpoint", feed="f1")
    summary("f2: checkpoint", event="checkpoint", feed="f2")
    assert said == [m for m in said if "1 feed in the last" in m] and len(said) == 2
