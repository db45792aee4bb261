"""The state store's compare-and-swaps behave the same on SQLite and on PostgreSQL: one active job per feed,
a lease taken over fences its old holder, and a span's frontier moves only for its owner, one batch at a
time. PostgreSQL is a private server started for the tests (`conftest.py`) and stopped by its process id."""

from __future__ import annotations

import random
import time

import pytest
from sqlalchemy import func, insert, select, text, tuple_
from sqlalchemy.exc import IntegrityError

from feedctl.coordinator import fenced
from feedctl.node import share
from feedctl.state import batch_intents, checkpoints, event_times, jobs, many_rows, migrations, nodes, schema, spans
from feedctl.state.batch_intents import IntentKind
from feedctl.state.event_times import Recorded
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from support.jobs import definition


def test_a_second_active_job_of_a_feed_is_refused(store):
    with store.transaction() as conn:
        job = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
    with store.transaction() as conn, pytest.raises(jobs.JobExists):
        jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
    with pytest.raises(IntegrityError), store.transaction() as conn:
        row = dict(conn.execute(select(schema.jobs).where(schema.jobs.c.job_id == job.job_id)).first()._mapping)
        conn.execute(insert(schema.jobs).values({**row, "job_id": job.job_id + 1}))


def test_a_lease_taken_over_fences_its_old_holder_and_spans_move_one_batch_at_a_time(store):
    with store.transaction() as conn:
        job = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
        a = nodes.register(conn, "a", "", host="h", pid=1)
        old = jobs.claim_lease(conn, job.job_id, a.holder, 60)
        nodes.deregister(conn, a)  # a is gone: its lease is free at once
        live = nodes.live_holders(conn)
        new = jobs.claim_lease(conn, job.job_id, "b/2", 60, lambda holder: holder not in live)
    assert new == old + 1
    with store.transaction() as conn, pytest.raises(jobs.LeaseLost):
        fenced.cut(conn, job.job_id, old, "changes", Hlc(5), {"s.t": (0, 1)})
    with store.transaction() as conn:
        intent = fenced.cut(conn, job.job_id, new, "changes", Hlc(5), {"s.t": (0, 1)})
        spans.ensure(conn, job.job_id, {"s.t": 2}, 0, Hlc(0))
        for s in spans.of_job(conn, job.job_id):
            assert spans.assign(conn, job.job_id, s, "b", "placed")
        # an owner records a batch once; a node that does not own the span records nothing

        def emitted(node: str, span: int) -> list:
            [done] = spans.emitted(conn, [spans.Emitted(job.job_id, node, [("s.t", span)], 1, intent.target, 0)])
            return done

        assert emitted("b", 0) == [("s.t", 0)]
        assert emitted("b", 0) == []
        assert emitted("c", 1) == []
        assert spans.lowest(conn, job.job_id) == 0
        assert emitted("b", 1) == [("s.t", 1)]
        assert spans.lowest(conn, job.job_id) == intent.batch_seq
        assert spans.held_elsewhere(conn, job.job_id + 1) == {"b": 2}
        assert spans.held_elsewhere(conn, job.job_id) == {}


def test_a_nodes_emitted_batches_of_many_jobs_are_recorded_as_each_jobs_own_record_would(store):
    """The records of many jobs' emitted batches in a few statements (`emitted_batch.recorded`), over more spans
    than one statement holds: each job's spans move past the batch, only those the node still owns at the batch
    before; each batch's results add to what other nodes recorded; a job's two records in one group both land,
    in order."""
    import json

    from feedctl.node.emitted_batch import Record, recorded

    def record(job_id, node, keys, batch_seq, target, after, results):
        return Record(spans.Emitted(job_id, node, keys, batch_seq, target, after), results)

    with store.transaction() as conn:
        made = [
            jobs.create_job(conn, f"f{i}", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
            for i in range(201)
        ]
        targets = {}
        for job in made:
            epoch = jobs.claim_lease(conn, job.job_id, "n1:1", 60)
            for seq in (1, 2):
                intent = fenced.cut(conn, job.job_id, epoch, "changes", Hlc(10 + seq, seq), {"s.t": (0, seq)})
                targets[seq] = intent.target
            spans.ensure(conn, job.job_id, {"s.t": 2}, 0, Hlc(0))
            for span in spans.of_job(conn, job.job_id):
                assert spans.assign(conn, job.job_id, span, "c" if job is made[1] and span.span == 1 else "b", "test")
        conn.execute(  # another node's share of job 6's first batch
            schema.batch_intents.update()
            .where((schema.batch_intents.c.job_id == made[6].job_id) & (schema.batch_intents.c.batch_seq == 1))
            .values(result=json.dumps({"files": 2, "messages": 5}))
        )
    many = made[1:]
    both = [("s.t", 0), ("s.t", 1)]
    records = [record(j.job_id, "b", both, 1, targets[1], 0, {1: {"files": 1, "messages": 3}}) for j in many]
    records += [record(j.job_id, "b", both, 2, targets[2], 1, {2: {"files": 1, "messages": 1}}) for j in many[:5]]
    records.append(record(many[9].job_id, "b", both, 2, targets[2], 5, {}))  # not at batch 5: nothing moves
    with store.transaction() as conn:
        done = recorded(conn, records)
    n = len(many)
    assert done[0] == done[n] == [("s.t", 0)]  # job 1's second span is another node's
    # The spans each record moved, in no order: PostgreSQL returns an update's rows as it finds them.
    assert all(sorted(d) == both for d in done[1:n] + done[n + 1 : n + 5]) and done[-1] == []

    def spans_of(job) -> list[tuple]:
        with store.reading() as conn:
            return [(s.span, s.node, s.batch_seq, s.frontier) for s in spans.of_job(conn, job.job_id)]

    def result(job, seq: int) -> dict:
        with store.reading() as conn:
            return json.loads(
                conn.execute(
                    select(schema.batch_intents.c.result).where(
                        (schema.batch_intents.c.job_id == job.job_id) & (schema.batch_intents.c.batch_seq == seq)
                    )
                ).scalar()
                or "{}"
            )

    assert all(spans_of(j) == [(s, "b", 2, targets[2]) for s in (0, 1)] for j in many[1:5])  # both, in order
    at_first = [(s, "b", 1, targets[1]) for s in (0, 1)]
    assert all(spans_of(j) == at_first for j in many[5:])
    assert spans_of(made[1]) == [(0, "b", 2, targets[2]), (1, "c", 0, Hlc(0))]
    assert result(made[6], 1) == {"files": 3, "messages": 8}
    assert result(many[-1], 1) == {"files": 1, "messages": 3} and result(many[-1], 2) == {}
    assert result(many[2], 2) == {"files": 1, "messages": 1}


def test_the_writes_of_many_jobs_at_once_record_cut_and_take_what_each_job_s_batches_say(store):
    """A node's ticker records, cuts and takes for many jobs in a few statements, as a coordinator's step does
    for its one job (`event_times.record`, `cut`, `take`; `create_intent` and `checkpoint` for one job, fenced):
    each job ends with the rows its versions and batches say, over more jobs than one statement holds.
    Versions recorded meanwhile are not recorded again."""
    with store.transaction() as conn:
        made = [
            jobs.create_job(
                conn, f"f{i}", "sha256:x", definition("s.t", "s.u"), "file://x", Hlc(1), {"s.t": (0, 2), "s.u": (3, 1)}
            )
            for i in range(121)
        ]
        epochs = [jobs.claim_lease(conn, job.job_id, "n/1", 60) for job in made]
    (one, epoch), many = (made[0], epochs[0]), [job.job_id for job in made[1:]]
    fresh = [
        Recorded("s.t", 1, 10, Hlc(10, 0), 5, 50),
        Recorded("s.t", 2, 20, Hlc(20, 1), 6, 60),
        Recorded("s.u", 4, 15, Hlc(15, 0), 7, 70),
    ]
    batches = [batch_intents.NewBatch(Hlc(15, 0), {"s.u": (3, 4)}), batch_intents.NewBatch(Hlc(20, 1), {"s.t": (0, 2)})]
    with store.transaction() as conn:
        event_times.record(conn, {one.job_id: fresh})
        alone = [fenced.cut(conn, one.job_id, epoch, IntentKind.CHANGES, b.target, b.ranges) for b in batches]
        event_times.record(conn, {job_id: fresh for job_id in many})
        cut = batch_intents.cut(conn, {job_id: batches for job_id in many})
    assert alone == [
        batch_intents.Intent(1, IntentKind.CHANGES, Hlc(15, 0), {"s.u": (3, 4)}),
        batch_intents.Intent(2, IntentKind.CHANGES, Hlc(20, 1), {"s.t": (0, 2)}),
    ]
    assert all(cut[job_id] == alone for job_id in many)
    with store.transaction() as conn:
        fenced.checkpoint(conn, one.job_id, epoch, alone[-1].target, alone)
        checkpoints.take(conn, {job_id: cut[job_id] for job_id in many})

    def written(job_id: int) -> tuple:
        with store.reading() as conn:
            job = conn.execute(select(schema.jobs).where(schema.jobs.c.job_id == job_id)).first()
            c = schema.event_ts_log.c
            recorded = conn.execute(
                select(c.table_name, c.version, c.commit_wall, c.event_wall, c.event_logical, c.rows, c.bytes)
                .where(c.job_id == job_id)
                .order_by(c.table_name, c.version)
            ).all()
            c = schema.batch_intents.c
            cut = conn.execute(
                select(c.batch_seq, c.status, c.kind, c.target_wall, c.target_logical, c.ranges)
                .where(c.job_id == job_id)
                .order_by(c.batch_seq)
            ).all()
            c = schema.table_positions.c
            positions = conn.execute(
                select(c.table_name, c.version, c.spans).where(c.job_id == job_id).order_by(c.table_name)
            ).all()
        return (
            (job.high_water_wall, job.high_water_logical, job.running_status),
            [tuple(r) for r in recorded],
            [tuple(r) for r in cut],
            [tuple(r) for r in positions],
        )

    expected = (
        (20, 1, ""),
        [("s.t", 1, 10, 10, 0, 5, 50), ("s.t", 2, 20, 20, 1, 6, 60), ("s.u", 4, 15, 15, 0, 7, 70)],
        [(1, "done", "changes", 15, 0, '{"s.u": [3, 4]}'), (2, "done", "changes", 20, 1, '{"s.t": [0, 2]}')],
        [("s.t", 2, 2), ("s.u", 4, 1)],
    )
    assert written(one.job_id) == expected
    assert all(written(job_id) == expected for job_id in many)
    with store.transaction() as conn:  # as if the job's own step had recorded them meanwhile
        event_times.record(conn, {many[0]: fresh})
    assert written(many[0]) == expected


def test_what_a_node_reads_of_many_jobs_before_emitting_is_what_it_reads_of_each_alone(store):
    """A node's read of many jobs in one snapshot before emitting their batches (`share.pending`) has of each job
    what the reads of one job have (the oracle): its row, its spans, its pending batches (not those done), and
    the event timestamps each batch of changes reads (none for a scan), over more ranges than one statement
    holds. An id of no job reads as None."""
    with store.transaction() as conn:
        made = [
            jobs.create_job(
                conn, f"f{i}", "sha256:x", definition("s.t", "s.u"), "file://x", Hlc(1), {"s.t": (0, 2), "s.u": (5, 1)}
            )
            for i in range(70)
        ]
        for i, job in enumerate(made):
            epoch = jobs.claim_lease(conn, job.job_id, "n/1", 60)
            spans.ensure(conn, job.job_id, {"s.t": 2, "s.u": 1}, 0, job.high_water)
            event_times.record(
                conn, {job.job_id: [Recorded("s.t", v, v, Hlc(v * 10, i), v, 10 * v) for v in range(1, 8)]}
            )
            event_times.record(conn, {job.job_id: [Recorded("s.u", v, v, Hlc(v * 10, 0), 1) for v in range(6, 9)]})
            first = fenced.cut(conn, job.job_id, epoch, IntentKind.CHANGES, Hlc(20), {"s.t": (0, 2)})
            if i % 3 == 0:  # taken: no longer pending
                fenced.checkpoint(conn, job.job_id, epoch, first.target, [first])
            fenced.cut(conn, job.job_id, epoch, IntentKind.CHANGES, Hlc(60), {"s.t": (2, 5), "s.u": (5, 8)})
            if i % 7 == 0:
                fenced.cut(conn, job.job_id, epoch, IntentKind.SCAN, Hlc(61), {"s.v": (3, 3)})
            fenced.cut(conn, job.job_id, epoch, IntentKind.CHANGES, Hlc(70), {"s.t": (5, 7)})
    ids = [job.job_id for job in made]
    with store.reading() as conn:
        read = share.pending(conn, [*ids, max(ids) + 1])
    assert read[-1] is None
    for job_id, pending in zip(ids, read, strict=False):
        with store.reading() as conn:
            assert pending.job == jobs.get_job(conn, job_id)
            assert pending.spans == spans.of_job(conn, job_id)
            intents = batch_intents.pending_intents(conn, job_id)
            assert pending.intents == {i.batch_seq: i for i in intents}
            for i in intents:
                expected = {t: event_times.recorded_after(conn, job_id, t, a, b) for t, (a, b) in i.ranges.items()}
                assert pending.recorded_of(i) == (expected if i.kind == IntentKind.CHANGES else {})
    assert sum(len(p.intents) for p in read[:-1]) == 70 * 3 - 24 + 10  # a third taken, a tenth scanned
    assert read[1].recorded_of(read[1].intents[2])["s.u"][-1].version == 8


def test_rows_fetched_in_one_step_are_the_rows_the_statement_returns(store):
    """`many_rows.fetch` (on SQLite, the rows folded into one JSON value) returns what executing the statement
    returns (the oracle), in its order, by name, position and mapping: real numbers to the last digit, nulls,
    text of any character, integers past 2**53, an aggregate's unnamed columns, and no rows."""
    rng = random.Random(7)
    reals = [time.time() + rng.random(), rng.random(), 1e300, -2.5e-300, 0.1, 1.0]
    texts = ['say "hi"', "back\\slash\nline", "üñíçødé ✓", "", "[1, 2]", "null"]
    with store.transaction() as conn:
        conn.execute(
            insert(schema.nodes),
            [
                {
                    "node_id": f"n{i}",
                    "locality": texts[i],
                    "host": "h",
                    "pid": -i,
                    "started_at": reals[i],
                    "heartbeat_at": reals[-1 - i],
                    "lock_session": None if i % 2 else texts[-1 - i],
                }
                for i in range(6)
            ],
        )
        conn.execute(
            insert(schema.event_ts_log),
            [
                {
                    "job_id": 1,
                    "table_name": "s.t",
                    "version": v,
                    "commit_wall": 2**62 + v,
                    "event_wall": 2**53 + 1,
                    "event_logical": v,
                    "rows": 0,
                    "bytes": 0,
                }
                for v in range(300)
            ],
        )
    statements = [
        select(schema.nodes).order_by(schema.nodes.c.started_at.desc()),
        select(schema.event_ts_log).order_by(schema.event_ts_log.c.version.desc()),
        select(func.count(), func.max(schema.nodes.c.heartbeat_at), func.min(schema.nodes.c.locality)),
        select(schema.nodes.c.node_id, schema.nodes.c.pid * 2).where(schema.nodes.c.pid > -3),
        select(schema.nodes).where(schema.nodes.c.pid > 0),
    ]
    with store.reading() as conn:
        for statement in statements:
            expected = conn.execute(statement).all()
            fetched = many_rows.fetch(conn, statement)
            assert [tuple(r) for r in fetched] == [tuple(r) for r in expected]
            assert [dict(r._mapping) for r in fetched] == [dict(r._mapping) for r in expected]
        [first] = many_rows.fetch(conn, select(schema.nodes).where(schema.nodes.c.node_id == "n0"))
        assert (first.started_at, first.locality, first.lock_session) == (reals[0], texts[0], texts[-1])


def test_rows_among_many_values_given_as_one_parameter_are_those_an_in_list_selects(store):
    """`many_rows.among` (the values as one array, or one JSON array on SQLite) selects what a plain IN of one
    parameter a value selects (the oracle, a few values at a time): of one column and of several, integers
    past 2**53, text of any character, more values than one statement's parameters could hold, and none."""
    c = schema.event_ts_log.c
    tables = ["s.t", 'say "hi"', "üñíçødé ✓", "[1]"]
    with store.transaction() as conn:
        conn.execute(
            insert(schema.event_ts_log),
            [
                {
                    "job_id": 2**62 + v % 7,
                    "table_name": tables[v % 4],
                    "version": v,
                    "commit_wall": 0,
                    "event_wall": 0,
                    "event_logical": 0,
                    "rows": 0,
                    "bytes": 0,
                }
                for v in range(400)
            ],
        )
    rng = random.Random(11)
    versions = rng.sample(range(-5000, 5000), 4000)  # more than the 1,000 a statement once took
    pairs = [(2**62 + rng.randrange(8), rng.choice(tables)) for _ in range(12)]
    keys = select(c.job_id, c.table_name, c.version).order_by(c.version)
    with store.reading() as conn:

        def oracle(where_of, values):
            rows = set()
            for at in range(0, len(values), 100):
                rows |= {tuple(r) for r in conn.execute(keys.where(where_of(values[at : at + 100])))}
            return sorted(rows, key=lambda r: r[2])

        cases = [
            (c.version, versions, lambda part: c.version.in_(part)),
            (c.table_name, tables[1:3], lambda part: c.table_name.in_(part)),
            ((c.job_id, c.table_name), pairs, lambda part: tuple_(c.job_id, c.table_name).in_(part)),
            (c.version, [], lambda part: c.version.in_(part)),
        ]
        for columns, values, where_of in cases:
            got = [tuple(r) for r in many_rows.fetch(conn, keys.where(many_rows.among(conn, columns, values)))]
            assert got == oracle(where_of, values)
        assert len(oracle(lambda part: c.version.in_(part), versions)) > 100  # the values select rows


def test_a_node_renews_the_leases_it_still_holds_and_wakes_the_coordinator_of_a_lease_taken_over(store):
    """A node's leases renewed together: each lease it still holds at its epoch gets a new expiry, a lease another
    node took over keeps that node's, and its coordinator, napping, is woken to stand by."""
    import threading

    from feedctl.coordinator.lease import Heartbeat, Leases

    with store.transaction() as conn:
        made = [
            jobs.create_job(conn, f"f{i}", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
            for i in range(3)
        ]
        epochs = [jobs.claim_lease(conn, job.job_id, "n1:1", 60) for job in made]
    lost = made[1].job_id
    with store.transaction() as conn:  # another node takes it over (n1 counted dead)
        taken = jobs.claim_lease(conn, lost, "n2:1", 60, can_take=lambda holder: True)
    assert taken == epochs[1] + 1

    def expiries() -> dict[int, float]:
        with store.reading() as conn:
            return {job.job_id: jobs.get_job(conn, job.job_id).lease_expires_at for job in made}

    before, leases = expiries(), Leases(store, 60)
    beats = {
        job.job_id: Heartbeat(store, job.job_id, "n1:1", epoch, 60, leases, threading.Event())
        for job, epoch in zip(made, epochs)
    }
    for beat in beats.values():
        beat.__enter__()
    with store.transaction(node=True) as conn:
        leases.renew(conn)
    after = expiries()
    assert after[lost] == before[lost]
    assert all(after[j] > before[j] for j in beats if j != lost)
    assert [j for j, beat in beats.items() if beat.lost.is_set() or beat.wake.is_set()] == [lost]
    with store.reading() as conn:
        assert (jobs.get_job(conn, lost).coordinator, jobs.get_job(conn, lost).lease_epoch) == ("n2:1", taken)
    with store.transaction(node=True) as conn:  # the lease lost is renewed no more
        leases.renew(conn)
    assert expiries()[lost] == before[lost]


def test_a_node_heartbeats_and_renews_its_leases_while_its_feeds_hold_every_pooled_connection(store):
    """A node's many feeds may hold every connection of the pool at once; its heartbeat and the renewal of its
    leases do not wait behind them, else the other nodes would count it dead and take its jobs."""
    import time

    from feedctl.coordinator.lease import Heartbeat, Leases
    from feedctl.node.membership import Membership

    observer = StateStore(store.url)  # this store's own pool is taken

    def renewed() -> tuple[float, float]:
        with observer.reading() as conn:
            [node] = nodes.list_nodes(conn)
            return node.heartbeat_at, jobs.get_job(conn, job.job_id).lease_expires_at

    with store.transaction() as conn:
        job = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
    with Membership(store, "busy", ttl=0.6) as member, Leases(store, 0.6) as leases:
        with store.transaction() as conn:
            epoch = jobs.claim_lease(conn, job.job_id, member.node.holder, 0.6)
        pool = store.engine.pool
        held = [store.engine.connect() for _ in range(pool.size() + pool._max_overflow)]
        try:
            with Heartbeat(store, job.job_id, member.node.holder, epoch, 0.6, leases) as lease:
                before = renewed()
                deadline = time.monotonic() + 5  # a beat every 0.2 s; the pool would give a connection in 30
                while not all(now > then for now, then in zip(renewed(), before)):
                    assert time.monotonic() < deadline, "the heartbeat or the lease waited for a pooled connection"
                    time.sleep(0.05)
                assert not lease.lost.is_set() and not member.lost.is_set()
        finally:
            for conn in held:
                conn.close()
    observer.close()


def test_a_store_of_schema_3_is_upgraded_with_each_spans_home_and_note(store):
    with store.transaction() as conn:
        job = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
        spans.ensure(conn, job.job_id, {"s.t": 2}, 0, Hlc(0))
        for column in ("home", "note"):
            conn.execute(text(f"ALTER TABLE span_frontiers DROP COLUMN {column}"))
        conn.execute(schema.meta.delete().where(schema.meta.c.key == "schema_version"))
        conn.execute(insert(schema.meta).values(key="schema_version", value="3"))
    upgraded = StateStore(store.url)
    try:
        with upgraded.transaction() as conn:
            assert conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            ).scalar() == str(schema.SCHEMA_VERSION)
            assert [(s.span, s.home, s.note) for s in spans.of_job(conn, job.job_id)] == [(0, None, ""), (1, None, "")]
            spans.ensure(conn, job.job_id, {"s.t": 2}, 0, Hlc(0), {"s.t": "region=us-east1"})  # the table got a home
            assert {s.home for s in spans.of_job(conn, job.job_id)} == {"region=us-east1"}
    finally:
        upgraded.close()


def test_a_store_of_schema_7_is_upgraded_and_a_node_registers(store):
    """Version 7 kept a node's views in a `views` column no default fills; version 8 keeps them apart."""
    with store.transaction() as conn:
        conn.execute(text("ALTER TABLE nodes ADD COLUMN views TEXT"))
        conn.execute(text("UPDATE nodes SET views = '{}'"))
        if store.engine.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE nodes ALTER COLUMN views SET NOT NULL"))
        conn.execute(schema.meta.delete().where(schema.meta.c.key == "schema_version"))
        conn.execute(insert(schema.meta).values(key="schema_version", value="7"))
    upgraded = StateStore(store.url)
    try:
        with upgraded.transaction() as conn:
            nodes.register(conn, "n1", "region=us-east1")
            assert [n.node_id for n in nodes.list_nodes(conn)] == ["n1"]
    finally:
        upgraded.close()


def test_the_schema_steps_are_numbered_once_each_up_to_the_current_version():
    versions = [version for version, _ in migrations.steps()]
    assert versions == sorted(set(versions)) and versions[0] > 1 and versions[-1] <= schema.SCHEMA_VERSION
    assert all(callable(module.upgrade) for _, module in migrations.steps())


def test_a_regional_table_gets_a_block_of_spans_per_region_as_regions_appear(store):
    with store.transaction() as conn:
        job = jobs.create_job(
            conn, "movr", "sha256:x", definition("movr.vehicles"), "file://x", Hlc(1), {"movr.vehicles": (0, 2)}
        )
        first = spans.add_regions(
            conn, job.job_id, "movr.vehicles", ["region=us-east1", "region=us-west1"], 2, 0, Hlc(1)
        )
        epoch = jobs.claim_lease(conn, job.job_id, "a/1", 60)
        fenced.cut(conn, job.job_id, epoch, "changes", Hlc(7), {"movr.vehicles": (0, 1)})
        last = batch_intents.last_cut(conn, job.job_id)
        later = spans.add_regions(
            conn,
            job.job_id,
            "movr.vehicles",  # one known, one new, a NULL region
            ["region=us-west1", "region=europe-west1", None],
            2,
            *last,
        )
        rows = spans.of_job(conn, job.job_id)
    assert first == ["region=us-east1", "region=us-west1"] and later == ["region=europe-west1", None]
    assert [(s.span, s.home, s.batch_seq, s.node) for s in rows] == [
        (0, "region=us-east1", 0, None),
        (1, "region=us-east1", 0, None),
        (2, "region=us-west1", 0, None),
        (3, "region=us-west1", 0, None),
        (4, "region=europe-west1", 1, None),
        (5, "region=europe-west1", 1, None),  # after the batch cut before
        (6, None, 1, None),
        (7, None, 1, None),
    ]
    assert rows[4].frontier == Hlc(7) and rows[4].note == "new region"


def test_a_holder_stopped_inside_a_transaction_does_not_keep_the_lease(postgres_url):
    """A coordinator stopped (SIGSTOP) between two statements of a transaction holds its job's row lock; the
    server ends its session once it has been idle in the transaction for 10 s, so another node's claim of the
    expired lease goes through rather than waiting for as long as the holder stays stopped."""
    import time

    from sqlalchemy.exc import DBAPIError

    stopped, other = StateStore(postgres_url), StateStore(postgres_url)
    try:
        with other.transaction() as conn:
            for table in reversed(schema.metadata.sorted_tables):
                conn.execute(table.delete())
            job = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
            epoch = jobs.claim_lease(conn, job.job_id, "a/1", 0.5)
        held = stopped.engine.connect()
        held.begin()
        fenced.hold(held, job.job_id, epoch)  # the job's row locked; then nothing more
        time.sleep(1)  # the lease expires
        began = time.monotonic()
        with other.transaction() as conn:
            taken = jobs.claim_lease(conn, job.job_id, "b/2", 60)
        waited = time.monotonic() - began
        assert taken == epoch + 1 and 5 < waited < 30, waited
        with pytest.raises(DBAPIError):  # its session is gone: it moves nothing when it resumes
            held.execute(text("SELECT 1"))
        held.invalidate()
    finally:
        stopped.close()
        other.close()


def test_jobs_and_status_answer_while_a_stopped_process_holds_the_sqlite_write_lock(tmp_path):
    """On SQLite a process stopped inside a transaction keeps the write lock until it wakes: no node can write
    meanwhile, but opening the store and the commands that only look (jobs, status, nodes) still answer."""
    import sqlite3

    from feedctl.commands.jobs import job_records
    from feedctl.commands.nodes import node_records
    from feedctl.commands.status import job_status
    from support import copy_demo_project

    root = copy_demo_project(tmp_path / "demo")
    store = StateStore("sqlite:///target/state.db", root)
    with store.transaction() as conn:
        jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
    store.close()
    holder = sqlite3.connect(root / "target/state.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # as a process stopped between two statements holds it
    try:
        impatient = sqlite3.connect(root / "target/state.db", timeout=0.2, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            impatient.execute("BEGIN IMMEDIATE")  # writers wait for it
        impatient.close()
        assert [r["feed"] for r in job_records(root)] == ["orders"]
        assert job_status(root, "orders")["feed"] == "orders"
        assert node_records(root) == []
    finally:
        holder.execute("ROLLBACK")
        holder.close()


FAR_NODE = """
import os, sys, time
from feedctl.state import nodes
from feedctl.state.session_lock import SessionLock
from feedctl.state.store import StateStore

store = StateStore(sys.argv[1])
with store.transaction() as conn:
    node = nodes.register(conn, "far", "region=x", host="elsewhere", pid=os.getpid())
lock = SessionLock(store)
with store.transaction() as conn:
    nodes.heartbeat(conn, node, lock.keep(node))
print("ready", flush=True)
time.sleep(600)
"""


def test_a_node_of_another_host_is_dead_as_soon_as_its_process_ends(postgres_url):
    """On PostgreSQL a node's process holds a session lock: killed on another host (whose pid this host cannot
    look up), it is dead at once, though its heartbeat is fresh; stopped, it is not (the liveness TTL decides).
    A lock taken before the server last started says nothing; a node whose lock's session was cut off takes
    it again at its next heartbeat."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from feedctl.node.membership import Membership
    from feedctl.state import session_lock

    def wait_for(condition, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "condition not met"
            time.sleep(0.05)

    store = StateStore(postgres_url)

    def live(node_id: str) -> bool:
        with store.transaction() as conn:  # a fresh heartbeat: only the session lock can make it dead
            conn.execute(
                schema.nodes.update().where(schema.nodes.c.node_id == node_id).values(heartbeat_at=time.time())
            )
            return (
                nodes.live_holders(conn) & {n.holder for n in nodes.list_nodes(conn) if n.node_id == node_id} != set()
            )

    def lock_held(node: nodes.Node) -> bool:
        with store.reading() as conn:
            return session_lock.key(node.node_id, node.host, node.pid) in session_lock.held(conn)[1]

    with store.transaction() as conn:
        for table in reversed(schema.metadata.sorted_tables):
            conn.execute(table.delete())
    far = subprocess.Popen(
        [sys.executable, "-c", FAR_NODE, postgres_url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert far.stdout.readline().strip() == "ready"
        with store.reading() as conn:
            [node] = nodes.list_nodes(conn)
            start = session_lock.held(conn)[0]
        assert (node.host, node.pid) == ("elsewhere", far.pid) and lock_held(node) and live("far")
        far.send_signal(signal.SIGSTOP)
        time.sleep(1)
        assert live("far"), "a stopped process keeps its lock"
        with store.transaction() as conn:  # as if the lock had been taken before the server restarted
            conn.execute(schema.nodes.update().values(lock_session="2000-01-01 00:00:00+00"))
        far.kill()
        far.wait()
        wait_for(lambda: not lock_held(node))
        assert live("far"), "a lock of an earlier server start says nothing"
        with store.transaction() as conn:
            conn.execute(schema.nodes.update().values(lock_session=start))
        assert not live("far"), "its session ended: dead at once"
        with store.reading() as conn:
            [dead] = nodes.list_nodes(conn)
        assert dead.ended and time.time() - dead.heartbeat_at < 5
    finally:
        far.kill()
        far.wait()

    with Membership(store, "near", ttl=0.6) as near:
        mine = near.node
        assert lock_held(mine)
        with store.transaction() as conn:  # the session holding its lock cut off
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND "
                    "objsubid = 1 AND (classid::bigint << 32 | objid::bigint) = "
                    f"{session_lock.key(mine.node_id, mine.host, mine.pid)}"
                )
            )
        wait_for(lambda: not lock_held(mine))
        wait_for(lambda: lock_held(mine) and live("near"))
    store.close()
