"""`feedctl run` end to end: real Delta tables, real Spark, real files in a `file://` sink.

Each test builds a small project over tables it writes itself, so that every expected message is known:
the oracle is the table's own snapshot at each version (support.e2e.Table.changes), never its change feed.
What is asserted is what a user reading the sink's files would check (every line parsed as JSON).
"""

from __future__ import annotations

import re

from support.e2e import (
    HLC,
    TS33,
    Table,
    assert_verified,
    check_changes,
    file_sink,
    hlc,
    job_of,
    messages,
    read_sink,
    run,
    sink_dir,
    ts33_hlc,
    write_project,
)

COLUMNS = {"id": "int64", "name": "string", "v": "int64"}


def rows(*ids: int, v: int = 0) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "v": v + i} for i in ids]


def check_resolved(files) -> list[tuple[int, int]]:
    """The cloud-storage consumer's rules (reference §4.3); returns the resolved timestamps in order.

    - `<ts33>.RESOLVED` holds `{"resolved":"<ns>.<logical>"}` naming the same timestamp, in its partition;
    - a data file's timestamp is ≤ every event in it and > every resolved timestamp listed before it;
    - after `R.RESOLVED`, no message with `updated` ≤ R appears that was not seen before it."""
    resolved: list[tuple[int, int]] = []
    seen: set = set()
    for f in files:
        assert TS33.match(f.ts33), f.name
        folder = f.name.rsplit("/", 1)[0]
        assert folder == f"{f.ts33[:4]}-{f.ts33[4:6]}-{f.ts33[6:8]}", f.name  # daily partition of its time
        if f.resolved:
            assert f.base == f.ts33 + ".RESOLVED"
            assert f.raw.decode().strip() == '{"resolved":"%s"}' % f.lines[0]["resolved"]
            ts = hlc(f.lines[0]["resolved"])
            assert ts == ts33_hlc(f.ts33)
            assert not resolved or ts > resolved[-1]
            resolved.append(ts)
            continue
        ts = ts33_hlc(f.ts33)
        assert f.lines, f"empty data file {f.name}"
        assert all(ts <= hlc(m["updated"]) for m in f.lines), f.name
        assert not resolved or ts > resolved[-1], f"{f.name} is not after resolved {resolved[-1]}"
        for m in f.lines:
            event = (tuple(m["key"]), m["updated"])
            assert not resolved or hlc(m["updated"]) > resolved[-1] or event in seen, (
                f"{event} first emitted after resolved {resolved[-1]}"
            )
            seen.add(event)
    return resolved


def test_changes_arrive_at_least_once_in_commit_order_with_resolved(tmp_path):
    """Two tables in one feed: `t` changed in every way, `u` now and then; small batches, resolved at every
    checkpoint, three runs."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3, 4, 5, 6))
    u = Table(tmp_path / "data" / "u", {"code": "string", "n": "int64"}, ["code"], [{"code": "a", "n": 1}])
    root = write_project(
        tmp_path / "p",
        {
            "t": {"path": str(t.path), "primary_key": ["id"], "spans": 3},
            "u": {"path": str(u.path), "primary_key": ["code"], "spans": 2},
        },
        [
            {
                "name": "f",
                "tables": ["s.t", "s.u"],
                "sink": "out",
                "options": {
                    "updated": True,
                    "diff": True,
                    "resolved": True,
                    "min_checkpoint_frequency": "0s",
                    "batch_rows": 3,
                },
            }
        ],
        [file_sink("out")],
    )
    assert run(root)["f"].status == "running"  # the initial scan of version 0
    t.append(rows(7, 8))
    u.append([{"code": "b", "n": 2}])
    t.update("id IN (1, 2, 7)", v="v + 10")
    u.update("code = 'a'", n="n + 1")
    t.delete("id IN (3, 8)")
    t.update("id = 1", name="'x'")
    t.append(rows(3, v=100))  # a deleted key comes back
    # One commit deletes every row and writes them again: each key that is in both is one update,
    # whose `before` is the row before the commit (only the last change of a key within a commit counts).
    current = t.snapshot(t.version)
    t.overwrite([{**r, "v": r["v"] + 1000} for k, r in current.items() if k != (5,)] + rows(9))
    middle = t.version
    report = run(root)["f"]
    assert report.status == "running" and report.batches >= 3  # batch_rows cuts several batches
    t.update("id = 1", v="v + 1")
    t.delete("id = 1")
    t.append(rows(1, v=7))
    u.delete("code = 'b'")
    run(root)

    files = read_sink(sink_dir(root, "out"))
    assert {f.topic for f in files} == {None, "t", "u"}
    emitted = [m for f in files if f.topic == "t" for m in f.lines]
    for m in emitted:
        assert set(m) == {"after", "before", "key", "updated"}, m
        assert HLC.match(m["updated"]) and m["updated"].endswith(".0000000000")
        if m["after"] is None:  # a delete: the key and the last state
            assert m["before"] is not None and m["before"]["id"] == m["key"][0]
    scan = [(0, k, None, r) for k, r in t.snapshot(0).items()]
    version_ts = check_changes(emitted, scan + t.changes(0), t)
    assert len(version_ts) == t.version + 1
    deletes = [m for m in emitted if m["after"] is None]
    assert sorted(m["key"][0] for m in deletes) == [1, 3, 5, 8]
    overwrite = [m for m in emitted if hlc(m["updated"]) == version_ts[middle]]
    assert sorted(m["key"][0] for m in overwrite) == [1, 2, 3, 4, 5, 6, 7, 9]  # one message per key
    assert len({m["key"][0] for m in emitted if m["updated"] == emitted[0]["updated"]}) == 6  # the scan

    u_emitted = [m for f in files if f.topic == "u" for m in f.lines]
    u_ts = check_changes(u_emitted, [(0, ("a",), None, {"code": "a", "n": 1})] + u.changes(0), u)
    assert u_ts[0] == version_ts[0]  # one initial scan, at the job's start, for both tables

    resolved = check_resolved(files)  # over both tables: a resolved timestamp covers every table
    assert len(resolved) >= 4
    assert resolved[-1] >= max([*version_ts.values(), *u_ts.values()])
    high_water = job_of(root, "f")["high_water_timestamp"]
    assert hlc(high_water) >= resolved[-1]
    assert_verified(root, "f")


def test_changes_read_from_the_log_are_those_of_the_change_data_feed(tmp_path):
    """One table with its change data feed on, followed twice (`changes: cdf` and `changes: log`), and a
    table without it (`auto`) changed the same ways: every update, delete and overwrite rewrites files. The
    two feeds of the first emit the same messages; the third emits what its snapshots say, and verify
    judges all three."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3, 4, 5, 6))
    off = Table(tmp_path / "data" / "off", COLUMNS, ["id"], rows(1, 2, 3, 4, 5, 6), change_data_feed=False)
    options = {"updated": True, "diff": True, "batch_rows": 4}
    root = write_project(
        tmp_path / "p",
        {
            "cdf": {"path": str(t.path), "primary_key": ["id"], "spans": 2, "changes": "cdf"},
            "log": {"path": str(t.path), "primary_key": ["id"], "spans": 3, "changes": "log"},
            "off": {"path": str(off.path), "primary_key": ["id"], "spans": 2},
        },
        [
            {"name": f"f_{n}", "tables": [f"s.{n}"], "sink": f"out_{n}", "options": options}
            for n in ("cdf", "log", "off")
        ],
        [file_sink(f"out_{n}") for n in ("cdf", "log", "off")],
    )
    assert {r.status for r in run(root).values()} == {"running"}
    for table in (t, off):
        table.append(rows(7, 8))
        table.update("id IN (1, 2, 7)", v="v + 10")
        table.delete("id IN (3, 8)")
        table.update("id = 1", name="'x'")
        current = table.snapshot(table.version)
        table.overwrite([{**r, "v": r["v"] + 1000} for k, r in current.items() if k != (5,)] + rows(9))
        table.dt().optimize.compact()
        table.update("id = 2", id="20")  # a key changed
    assert {r.status for r in run(root).values()} == {"running"}

    def by_key(sink: str) -> dict:
        out = {}
        for m in messages(root, sink):
            out.setdefault(m["key"][0], []).append((m["after"], m["before"]))
        return out

    assert by_key("out_log") == by_key("out_cdf")
    assert sum(map(len, by_key("out_log").values())) > 6 + 5
    scan = [(0, k, None, r) for k, r in off.snapshot(0).items()]
    check_changes(messages(root, "out_off"), scan + off.changes(0), off)
    assert_verified(root, "f_cdf", "f_log", "f_off")


def test_primary_key_change_is_a_delete_and_an_insert(tmp_path):
    t = Table(
        tmp_path / "data" / "t",
        {"region": "string", "id": "int64", "v": "int64"},
        ["region", "id"],
        [{"region": "eu", "id": 1, "v": 1}, {"region": "eu", "id": 2, "v": 2}, {"region": "us", "id": 3, "v": 3}],
    )
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["region", "id"], "spans": 4}},
        [
            {
                "name": "f",
                "tables": ["s.t"],
                "sink": "out",
                "options": {"updated": True, "diff": True, "initial_scan": "no"},
            }
        ],
        [file_sink("out")],
    )
    run(root)
    moved = t.update("id IN (1, 3)", region="'ap'")
    run(root)
    emitted = sorted(messages(root, "out"), key=lambda m: (m["key"], m["after"] is None))
    assert [(m["key"], m["after"], m["before"]) for m in emitted] == [
        (["ap", 1], {"region": "ap", "id": 1, "v": 1}, None),
        (["ap", 3], {"region": "ap", "id": 3, "v": 3}, None),
        (["eu", 1], None, {"region": "eu", "id": 1, "v": 1}),
        (["us", 3], None, {"region": "us", "id": 3, "v": 3}),
    ]
    assert len({m["updated"] for m in emitted}) == 1
    assert hlc(emitted[0]["updated"])[0] >= t.commit_ns(moved)
    check_changes(emitted, t.changes(moved - 1), t)
    assert_verified(root, "f")


QUERIES = {
    "macros/m.sql": "{% macro doubled(column) %}({{ column }} * 2){% endmacro %}\n",
    "feeds/big.sql": "SELECT id, v, {{ doubled('v') }} AS v2, event_op() AS op\n"
    "FROM {{ source('s', 't') }}\nWHERE v >= {{ var('min_v') }}\n",
    "feeds/ups.sql": "SELECT id, cdc_prev.v AS old_v, v AS new_v FROM {{ source('s', 't') }}\n"
    "WHERE event_op() = 'update' AND v > cdc_prev.v\n",
    "feeds/dels.sql": "SELECT id, name FROM {{ source('s', 't') }} WHERE event_op() = 'delete'\n",
}


def test_cdc_queries_filter_and_project(tmp_path):
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3, 4, 5))
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [
            {"name": "big", "query": "big.sql", "sink": "big", "options": {"updated": True}},
            {
                "name": "ups",
                "query": "ups.sql",
                "sink": "ups",
                "options": {"envelope": "wrapped", "initial_scan": "no"},
            },
            {
                "name": "dels",
                "query": "dels.sql",
                "sink": "dels",
                "options": {"envelope": "wrapped", "diff": True, "initial_scan": "no"},
            },
        ],
        [file_sink("big"), file_sink("ups"), file_sink("dels")],
        files=QUERIES,
        vars={"min_v": 3},
    )
    run(root)
    t.update("id IN (1, 4)", v="v + 5")
    t.update("id = 5", v="0")
    t.delete("id IN (2, 4)")
    t.append(rows(6) + [{"id": 7, "name": "n7", "v": 1}])
    run(root)
    changes = [(None, k, None, r) for k, r in t.snapshot(0).items()] + t.changes(0)

    # bare (the default of CDC queries): the projection at the top level, metadata under __crdb__
    big = messages(root, "big")
    for m in big:
        assert set(m) == {"__crdb__", "id", "v", "v2", "op"} and set(m["__crdb__"]) == {"key", "updated"}
    expected = sorted(
        (r["id"], r["v"], 2 * r["v"], "insert" if b is None else "update")
        for _, _, b, r in changes
        if r is not None and r["v"] >= 3
    )
    assert sorted((m["id"], m["v"], m["v2"], m["op"]) for m in big) == expected
    assert expected == [
        (1, 6, 12, "update"),
        (3, 3, 6, "insert"),
        (4, 4, 8, "insert"),
        (4, 9, 18, "update"),
        (5, 5, 10, "insert"),
        (6, 6, 12, "insert"),
    ]
    assert all(m["__crdb__"]["key"] == [m["id"]] for m in big)

    ups = messages(root, "ups")
    assert sorted((m["key"], m["after"]) for m in ups) == [
        ([1], {"id": 1, "old_v": 1, "new_v": 6}),
        ([4], {"id": 4, "old_v": 4, "new_v": 9}),
    ]
    assert all(set(m) == {"after", "key"} for m in ups)

    # a delete shows only its key in `after` (null) and the projected previous row in `before`
    dels = messages(root, "dels")
    assert sorted((m["key"], m["after"], m["before"]) for m in dels) == [
        ([2], None, {"id": 2, "name": "n2"}),
        ([4], None, {"id": 4, "name": "n4"}),
    ]
    assert_verified(root, "big")


def test_spark_plan_keeps_every_span_in_one_task(tmp_path, monkeypatch):
    """No shuffle: the changes are staged a file per span, and one task reads a span, pairs it, runs the CDC
    query over it and writes its files, so no two tasks ever write one span's files; there are as many tasks
    as spans, up to the cores Spark has, so no core idles while a task holds two spans."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from feedctl.tasks import batch

    plans, placements = [], []
    original = batch.messages

    def capture(*args, **kwargs):
        df = original(*args, **kwargs)
        plans.append(df._jdf.queryExecution().executedPlan().toString())
        placements.append({(r[0], r[1]) for r in df.select(F.spark_partition_id(), "__span").distinct().collect()})
        return df

    monkeypatch.setattr(batch, "messages", capture)
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(*range(1, 21)))
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id", "name"], "spans": 3}},
        [
            {"name": "plain", "tables": ["s.t"], "sink": "plain", "options": {"diff": True, "initial_scan": "no"}},
            {
                "name": "big",
                "query": "big.sql",
                "sink": "big",
                "options": {"diff": True, "envelope": "wrapped", "initial_scan": "no"},
            },
        ],
        [file_sink("plain", file_size="100B"), file_sink("big")],
        files=QUERIES,
        vars={"min_v": 3},
    )
    run(root)
    t.update("id > 5", v="v + 1")
    t.delete("id < 3")
    run(root)
    assert len(plans) == 1  # the query feed's one batch of changes
    for plan in plans:
        assert not re.findall(r"\bExchange\b", plan), plan
    tasks_of: dict[int, set[int]] = {}
    for placed in placements:
        for task, span in placed:
            tasks_of.setdefault(span, set()).add(task)
    assert sorted(tasks_of) == [0, 1, 2] and all(len(tasks) == 1 for tasks in tasks_of.values())
    cores = SparkSession.getActiveSession().sparkContext.defaultParallelism
    assert len(set().union(*tasks_of.values())) == min(3, cores)
    # What a user sees of it: within one batch each span's files are numbered 0, 1, 2... by one writer.
    names = [f.base for f in read_sink(sink_dir(root, "plain"))]
    by_span: dict[str, list[int]] = {}
    for name in names:
        _, job, batch_seq, span, seq = name[:33], *name[34:].split("-")[:4]
        by_span.setdefault(f"{job}-{batch_seq}-{span}", []).append(int(seq, 16))
    assert len(by_span) == 3 and any(len(seqs) > 1 for seqs in by_span.values())
    assert all(sorted(seqs) == list(range(len(seqs))) for seqs in by_span.values())
    assert len(messages(root, "plain")) == 17


def test_a_span_whose_node_died_catches_up_on_its_missed_batches_in_one_job(tmp_path):
    """Spans 0 sit on a node that stops heartbeating while spans 1 run two batches ahead: once the node is
    found dead, spans 0 emit both batches in one Spark job, each under its own batch's file names (the
    second batch holds a table the first does not), and the feed verifies."""
    import threading

    from feedctl.commands.run import run_feeds
    from feedctl.node.settings import RunSettings
    from feedctl.project.loader import load_project
    from feedctl.state import jobs, nodes, spans
    from feedctl.state.store import StateStore

    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(*range(1, 9)))
    u = Table(tmp_path / "data" / "u", COLUMNS, ["id"], rows(*range(1, 9)))
    root = write_project(
        tmp_path / "p",
        {
            "t": {"path": str(t.path), "primary_key": ["id"], "spans": 2},
            "u": {"path": str(u.path), "primary_key": ["id"], "spans": 2},
        },
        [
            {
                "name": "f",
                "tables": ["s.t", "s.u"],
                "sink": "out",
                "options": {"updated": True, "resolved": True, "min_checkpoint_frequency": "0s", "batch_rows": 2},
            }
        ],
        [file_sink("out")],
    )
    assert run(root)["f"].status == "running"  # the initial scan
    for i in range(1, 7):  # commits of every row, more than batch_rows: a batch each, with rows of both spans
        (u if i == 2 else t).update("id > 0", v=f"v + {i}")

    store = StateStore.of_project(load_project(root)[0])
    with store.transaction() as conn:
        job = jobs.newest_job(conn, "f")
        gone = nodes.register(conn, "gone", "", host="elsewhere", pid=1, feeds=("f",))
        for span0 in [s for s in spans.of_job(conn, job.job_id) if s.span == 0]:
            assert spans.assign(conn, job.job_id, span0, "gone", "placed by the test")
    ahead = threading.Event()

    def beat():  # `gone` lives until span 1 is two batches past span 0
        while not ahead.wait(0.3):
            with store.transaction() as conn:
                nodes.heartbeat(conn, gone)
                if max(s.batch_seq for s in spans.of_job(conn, job.job_id)) >= span0.batch_seq + 2:
                    ahead.set()

    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    messages_logged = []
    try:
        [report] = run_feeds(
            root,
            None,
            RunSettings(retries=0, closed_lag=0, liveness_ttl=2.0),
            log=lambda message, **fields: messages_logged.append(message),
        )
    finally:
        ahead.set()
        beating.join()
        store.close()
    assert report.status == "running", report
    caught_up = [re.search(r"batches (\d+)–(\d+) \(catching up\)", m) for m in messages_logged]
    [(first, last)] = [(int(m.group(1)), int(m.group(2))) for m in caught_up if m]
    assert first == span0.batch_seq + 1 and last >= first + 1, messages_logged
    files = read_sink(sink_dir(root, "out"))
    span0_batches = {int(m.group(1)) for f in files if (m := re.search(r"-[0-9a-f]{16}-(\d+)-0-", f.name))}
    assert set(range(first, last + 1)) <= span0_batches  # files of each batch, named as on its own
    assert_verified(root, "f")
