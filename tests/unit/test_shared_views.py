"""A shared staging's span paired once for the node's feeds (`tasks/shared_views.py`): the feeds due together
wait for the first one's messages, a failed pairing is tried again by the next feed, and what is kept stays
within its bound."""

from __future__ import annotations

import threading

import polars as pl
import pytest

from feedctl.tasks import shared_views
from feedctl.tasks.shared_views import SharedViews


def _frames(rows: int) -> list[pl.DataFrame]:
    return [pl.DataFrame({"id": list(range(rows))})]


def test_feeds_due_together_take_the_first_ones_messages():
    views, calls, started, release = SharedViews(), [], threading.Event(), threading.Event()

    def pair():
        calls.append(1)
        started.set()
        release.wait(30)
        return _frames(3)

    got = []
    first = threading.Thread(target=lambda: got.append(views.messages("span", pair)))
    first.start()
    assert started.wait(30)
    others = [threading.Thread(target=lambda: got.append(views.messages("span", pair))) for _ in range(4)]
    for thread in others:
        thread.start()
    release.set()
    for thread in [first, *others]:
        thread.join(30)
    assert len(calls) == 1 and len(got) == 5
    assert all(frames is got[0] for frames in got)
    assert (views.paired, views.taken) == (1, 4)
    views.messages("another span", lambda: _frames(1))
    assert views.paired == 2


def test_a_failed_pairing_is_not_kept_and_the_next_feed_pairs_itself():
    views = SharedViews()

    def broken():
        raise OSError("staged file gone")

    with pytest.raises(OSError):
        views.messages("span", broken)
    assert views.messages("span", lambda: _frames(2))[0].height == 2
    assert views.paired == 1


def test_what_is_kept_stays_within_its_bound_the_least_recently_used_going_first(monkeypatch):
    views = SharedViews(max_rows=10)
    for name in ("a", "b", "c"):
        views.messages(name, lambda: _frames(4))
    views.messages("b", lambda: pytest.fail("b was not kept"))  # used again: now the most recent
    views.messages("d", lambda: _frames(4))  # 16 rows: "a" goes, then "c"
    for name in ("b", "d"):
        views.messages(name, lambda name=name: pytest.fail(f"{name} was not kept"))
    paired = views.paired
    views.messages("a", lambda: _frames(4))
    assert views.paired == paired + 1  # paired again: it was not kept
    monkeypatch.setattr(shared_views, "MAX_SPAN_ROWS", 5)
    paired = views.paired
    views.messages("big", lambda: _frames(6))
    views.messages("big", lambda: _frames(6))
    assert views.paired == paired + 2  # a span over the bound is never kept


def test_messages_are_encoded_once_for_the_feeds_that_write_them_the_same_way():
    """Feeds over one table writing one format, envelope and topic, each into its own sink, share the bytes of
    a frame of shared messages; another way of writing them encodes them anew."""
    from feedctl.encoding.envelope import Envelope
    from feedctl.sinks.cloudstorage import FileWriter
    from feedctl.sinks.sink import TaskTarget

    views, frame = SharedViews(), pl.DataFrame({"id": [1, 2]})
    settings = {"uri": "file:///nowhere", "project_root": "/", "storage_options": {}, "compression": None}

    def writer(envelope: Envelope) -> FileWriter:
        return FileWriter(TaskTarget("cloudstorage", "s.t", "t", 0, 1, 1, "json", envelope, settings))

    calls = []

    def encoded(sink: FileWriter):
        def encode():
            calls.append(sink)
            return ("bytes of", sink.encoding())

        return views.encoded((("span", 0), sink.encoding()), encode, frame.height)

    plain, again, bare = writer(Envelope()), writer(Envelope()), writer(Envelope(kind="bare"))
    assert encoded(plain) is encoded(again) and calls == [plain]
    assert encoded(bare) != encoded(plain) and calls == [plain, bare]
