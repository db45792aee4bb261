"""The group commit of a node's small writes (`state/group_commit.py`), on a real SQLite store: writes handed
in together commit in one transaction, each writer gets its own outcome, and a store error commits none."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import DBAPIError

from feedctl.state.group_commit import GroupCommit
from feedctl.state.schema import meta
from feedctl.state.store import StateStore


@pytest.fixture
def store(tmp_path):
    return StateStore(f"sqlite:///{tmp_path / 'state.db'}")


def _keys(store: StateStore) -> set[str]:
    with store.reading() as conn:
        return {k for (k,) in conn.execute(select(meta.c.key)) if k.startswith("k")}


def _put(key: str, value: str = "v"):
    def write(conn):
        conn.execute(insert(meta).values(key=key, value=value))
        return key

    return write


class _Held:
    """A write that holds its transaction open until released, saying when it has begun."""

    def __init__(self, write):
        self.write, self.begun, self.release = write, threading.Event(), threading.Event()

    def __call__(self, conn):
        self.begun.set()
        self.release.wait(30)
        return self.write(conn)


def _together(group: GroupCommit, first: _Held, writes: list) -> tuple[dict, dict]:
    """Run `first`, then `writes` while it holds its transaction open, each on a thread of its own: once every
    one of `writes` waits behind it, `first` commits, and the others make the next group."""
    results, errors = {}, {}

    def run(i, write):
        try:
            results[i] = group.run(i, write)
        except Exception as exc:
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate([first, *writes])]
    threads[0].start()
    assert first.begun.wait(30)
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 30
    while len(group._waiting) < len(writes) and time.monotonic() < deadline:
        time.sleep(0.01)
    first.release.set()
    for thread in threads:
        thread.join(30)
    return results, errors


def test_writes_handed_in_together_commit_in_one_transaction_each_with_its_result(store):
    group = GroupCommit(store)
    results, errors = _together(group, _Held(_put("k0")), [_put(f"k{i}") for i in range(1, 10)])
    assert not errors
    assert results == {i: f"k{i}" for i in range(10)}
    assert group.groups == 2  # the first write alone, then the nine that waited behind it
    assert _keys(store) == {f"k{i}" for i in range(10)}


def test_a_write_that_raises_fails_alone_and_the_others_commit(store):
    group = GroupCommit(store)

    def refused(conn):
        raise LookupError("lease lost")  # as a fenced statement that matched no row: nothing written

    results, errors = _together(group, _Held(_put("k0")), [_put("k1"), refused, _put("k3")])
    assert list(errors) == [2] and isinstance(errors[2], LookupError)
    assert results == {0: "k0", 1: "k1", 3: "k3"}
    assert _keys(store) == {"k0", "k1", "k3"}


def test_a_store_error_fails_every_write_of_its_group_and_commits_none(store):
    group = GroupCommit(store)

    def broken(conn):
        conn.execute(text("UPDATE no_such_table SET x = 1"))

    results, errors = _together(group, _Held(_put("k0")), [_put("k1"), broken, _put("k3")])
    assert results == {0: "k0"}  # its own group committed before
    assert sorted(errors) == [1, 2, 3] and all(isinstance(e, DBAPIError) for e in errors.values())
    assert _keys(store) == {"k0"}
    assert group.run(9, _put("k9")) == "k9"  # the next writer leads a group of its own
    assert _keys(store) == {"k0", "k9"}


def test_items_handed_in_together_are_written_by_one_call_and_each_writer_gets_its_result(store):
    """With `together`, a group's items are written by one call (a few statements for all of them)."""
    calls, begun, release = [], threading.Event(), threading.Event()

    def together(conn, items: list[str]) -> list[str]:
        calls.append(items)
        if len(calls) == 1:  # the first group holds its transaction until the others wait behind it
            begun.set()
            release.wait(30)
        conn.execute(insert(meta), [{"key": key, "value": "v"} for key in items])
        return [key.upper() for key in items]

    group, results = GroupCommit(store, together), {}

    def run(i: int) -> None:
        results[i] = group.run(i, f"k{i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    threads[0].start()
    assert begun.wait(30)
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 30
    while len(group._waiting) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for thread in threads:
        thread.join(30)
    assert calls == [["k0"], [f"k{i}" for i in range(1, 6)]]
    assert results == {i: f"K{i}" for i in range(6)}
    assert _keys(store) == {f"k{i}" for i in range(6)}


def test_items_read_together_are_read_in_one_snapshot_that_waits_for_no_writer(store):
    """With `reading`, a group's items are read in one snapshot: a write committed while it is open is not seen
    by it, and does not wait for it (a group's look at hundreds of jobs holds no write lock); the next group
    sees it."""
    with store.transaction() as conn:
        conn.execute(insert(meta).values(key="k", value="before"))
    begun, release = threading.Event(), threading.Event()

    def together(conn, keys: list[str]) -> list[str]:
        def values() -> list[str]:
            return [conn.execute(select(meta.c.value).where(meta.c.key == key)).scalar() for key in keys]

        values()  # the snapshot taken
        begun.set()
        released.append(release.wait(5))  # False: the writer waited for the snapshot to end
        return values()

    group, seen, released = GroupCommit(store, together, reading=True), [], []
    reader = threading.Thread(target=lambda: seen.append(group.run(0, "k")))
    reader.start()
    assert begun.wait(30)
    with store.transaction() as conn:  # the snapshot open: a writer does not wait for it
        conn.execute(meta.update().where(meta.c.key == "k").values(value="after"))
    release.set()
    reader.join(30)
    assert released == [True] and seen == ["before"]
    assert group.run(1, "k") == "after"
