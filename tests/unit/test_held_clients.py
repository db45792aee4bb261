"""The clients a process holds for its sinks: one per settings, shared or pooled, made again only once
forgotten, closed together."""

from __future__ import annotations

import threading

from feedctl.sinks.held_clients import Pooled, Shared


def test_one_shared_client_per_settings_across_threads_until_forgotten():
    closed = []
    shared = Shared(lambda settings: object(), closed.append)
    got = []
    threads = [threading.Thread(target=lambda: got.append(shared.get({"url": "a", "n": 1}))) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for _, c in got}) == 1 and shared.made == 1
    key, client = shared.get({"n": 1, "url": "a"})  # the same settings in another order
    assert client is got[0][1]
    assert shared.get({"url": "b", "n": 1})[1] is not client and shared.held() == 2
    shared.forget(key, client)
    assert shared.get({"url": "a", "n": 1})[1] is not client and shared.made == 3
    shared.close_all()
    assert shared.held() == 0 and len(closed) == 2


def test_a_pooled_client_serves_one_writer_at_a_time_and_is_reused_once_given_back():
    closed = []
    pool = Pooled(closed.append)
    first, idle = pool.take("e", object)
    assert not idle
    second, idle = pool.take("e", object)  # the first is in use: a second one
    assert not idle and second is not first and pool.made == 2
    pool.give_back("e", first)
    assert pool.take("e", object) == (first, True) and pool.take("other", object)[1] is False
    pool.give_back("e", first)
    pool.give_back("e", second)
    pool.close_all()
    assert pool.held() == 0 and sorted(map(id, closed)) == sorted(map(id, [first, second]))
