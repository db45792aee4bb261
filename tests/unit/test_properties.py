"""Property tests of the pure parts the guarantees rest on: event timestamps, batch cutting, the span
frontier and high-water mark under lease fencing, file names and their order, file cutting that does not
depend on how rows arrive, and verify reading back every message the encoder writes."""

from __future__ import annotations

import gzip
import io
import json

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedctl import frame
from feedctl.coordinator import batch_plan, event_ts
from feedctl.encoding.envelope import Envelope
from feedctl.sinks import naming
from feedctl.sinks.registry import open_sink, writer
from feedctl.state.event_times import Recorded
from feedctl.units import Hlc
from support.jobs import definition

S = 1_000_000_000
walls = st.integers(min_value=S, max_value=4_000_000_000 * S)


@given(st.lists(walls, min_size=1, max_size=40), st.one_of(st.none(), walls), walls)
def test_event_timestamps_rise_strictly_above_commit_previous_and_floor(commits, previous, floor):
    previous_ts = Hlc(previous) if previous is not None else None
    stamps = event_ts.assign(commits, previous_ts, Hlc(floor))
    assert all(s.wall >= c and s > Hlc(floor) for s, c in zip(stamps, commits))
    assert all(a < b for a, b in zip(stamps, stamps[1:]))
    if previous_ts is not None:
        assert stamps[0] > previous_ts


@given(st.lists(walls, min_size=2, max_size=30), walls, st.data())
def test_recording_in_two_steps_gives_the_same_timestamps(commits, floor, data):
    cut = data.draw(st.integers(min_value=1, max_value=len(commits) - 1))
    whole = event_ts.assign(commits, None, Hlc(floor))
    first = event_ts.assign(commits[:cut], None, Hlc(floor))
    assert first + event_ts.assign(commits[cut:], first[-1], Hlc(floor)) == whole


@st.composite
def histories(draw):
    """Recorded versions of up to three tables, each table's timestamps increasing with its versions."""
    out = []
    for table in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)):
        stamps = sorted(draw(st.lists(st.integers(1, 60), min_size=0, max_size=12)))
        wall = 0
        for version, stamp in enumerate(stamps, start=1):
            wall = max(wall + 1, stamp * S)
            out.append(Recorded(table, version, wall, Hlc(wall), draw(st.integers(1, 50)), 0))
    return out


@settings(max_examples=300)
@given(histories(), st.integers(1, 120), st.one_of(st.none(), st.integers(1, 70)), st.integers(0, 80))
def test_cutting_batches_emits_every_version_once_and_never_leaves_one_behind(pending, max_rows, end, closed):
    end_time = Hlc(end * S) if end is not None else None
    positions = {t: 0 for t in "abc"}
    high_water, emitted, left = Hlc(0), [], list(pending)
    for _ in range(200):
        plan = batch_plan.cut(positions, left, high_water, Hlc(closed * S), max_rows, end_time)
        if plan is None:
            break
        assert plan.target >= high_water
        chosen = [p for p in left if p.table in plan.ranges and p.version <= plan.ranges[p.table][1]]
        # the limit may be passed only by versions sharing the batch's last timestamp (a timestamp is never split)
        if chosen:
            last = max(p.event_ts for p in chosen)
            assert sum(p.rows for p in chosen if p.event_ts < last) <= max_rows
        emitted += chosen
        left = [p for p in left if p not in chosen]
        for table, (after, up_to) in plan.ranges.items():
            assert after == positions[table]
            positions[table] = up_to
        high_water = plan.target
        # the high-water mark never passes a version not yet emitted
        assert all(p.event_ts > high_water for p in left)
        if end_time is not None:
            assert high_water <= end_time
    expected = [p for p in pending if end_time is None or p.event_ts <= end_time]
    assert sorted(emitted, key=lambda p: (p.table, p.version)) == sorted(expected, key=lambda p: (p.table, p.version))


hlcs = st.builds(Hlc, st.integers(min_value=S, max_value=4_000_000_000 * S), st.integers(0, 10**9))


@given(hlcs)
def test_file_timestamps_round_trip(ts):
    assert naming.parse_ts33(naming.ts33(ts)) == ts
    assert len(naming.ts33(ts)) == 33


@given(hlcs, hlcs, st.sampled_from(["daily", "hourly", "flat"]), st.integers(0, 5), st.integers(0, 300))
def test_listing_order_is_timestamp_order(a, b, partition_format, span, file_seq):
    def data(ts):
        return naming.data_file(ts, naming.uniquer(7, 1, span, file_seq), "rides", 3, "json", None, partition_format)

    if a < b:
        assert data(a) < data(b) and naming.resolved_file(a, partition_format) < data(b)
    # a resolved file follows every data file of its own timestamp (`-` sorts before `.`)
    assert data(a) < naming.resolved_file(a, partition_format)


def _rows(n: int, spans: int) -> pa.Table:
    """n messages over `spans` spans, sorted by (span, ts, key) as a span's task hands them over."""
    keys = sorted((i % spans, i // 3, i) for i in range(n))
    return pa.table(
        {
            frame.AFTER: pa.array([{"id": k, "v": "x" * (k % 17)} for _, _, k in keys]),
            frame.KEY: pa.array([{"id": k} for _, _, k in keys]),
            frame.TOPIC: pa.array(["t"] * n),
            frame.SPAN: pa.array([s for s, _, _ in keys], pa.int32()),
            frame.TS_WALL: pa.array([S + w for _, w, _ in keys], pa.int64()),
            frame.TS_LOGICAL: pa.array([0] * n, pa.int32()),
            frame.MVCC_WALL: pa.array([S] * n, pa.int64()),
            frame.OP: pa.array(["insert" if k % 5 else "update" for _, _, k in keys]),
        }
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 300), st.integers(1, 4), st.integers(40, 2000), st.data())
def test_files_do_not_depend_on_how_rows_are_split_into_batches(tmp_path_factory, n, spans, file_size, data):
    table = _rows(n, spans)

    cuts = _cuts(data, n)

    def emit(compression):
        return _emit(tmp_path_factory, table, file_size, compression, "json", cuts)

    first, second, gzipped = emit(None), emit(None), emit("gzip")
    assert first == second, "another split into batches wrote other names or bytes"
    assert [name + ".gz" for name in first] == list(gzipped)
    assert sum(len(body.splitlines()) for body in first.values()) == n
    for name, body in first.items():
        stamps = [Hlc(*map(int, json.loads(line)["updated"].split("."))) for line in body.decode().splitlines()]
        assert naming.parse_ts33(name[:33]) == min(stamps), "a file is named after its lowest timestamp"
        assert len(body) < file_size + 200 or len(stamps) == 1, "a file is cut once it reaches file_size"


def _cuts(data, n: int) -> list[int]:
    return sorted(data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=6)))


def _emit(
    tmp_path_factory, table: pa.Table, file_size: int, compression, fmt: str, cuts: list[int]
) -> dict[str, bytes]:
    """Emit `table` in batches cut at `cuts`; the files written, by name."""
    root = tmp_path_factory.mktemp("sink")
    sink = open_sink(
        f"file://{root}", {"file_size": file_size, "partition_format": "flat", "compression": compression}, str(root)
    )
    emitter = writer(sink.target("s.t", "t", 1, 9, 4, fmt, Envelope(updated=True, key_in_value=True)))
    n = table.num_rows
    for start, stop in zip([0, *cuts], [*cuts, n]):
        for batch in table.slice(start, stop - start).to_batches():
            emitter.add(pl.from_arrow(batch))
    emitter.finish()
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


def _decoded(fmt: str, body: bytes) -> pl.DataFrame:
    return {
        "parquet": lambda: pl.read_parquet(io.BytesIO(body)),
        "avro": lambda: pl.read_avro(io.BytesIO(body)),
        "csv": lambda: pl.read_csv(io.BytesIO(body), has_header=False),
    }[fmt]()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(["parquet", "avro", "csv"]),
    st.integers(1, 300),
    st.integers(1, 4),
    st.integers(40, 2000),
    st.data(),
)
def test_columnar_files_do_not_depend_on_how_rows_are_split_into_batches(
    tmp_path_factory, fmt, n, spans, file_size, data
):
    table = _rows(n, spans)
    first = _emit(tmp_path_factory, table, file_size, None, fmt, _cuts(data, n))
    second = _emit(tmp_path_factory, table, file_size, None, fmt, _cuts(data, n))
    assert list(first) == list(second), "another split into batches wrote other names"
    assert all(name.endswith("." + fmt) for name in first)
    decoded = {name: _decoded(fmt, body) for name, body in first.items()}
    assert all(decoded[name].equals(_decoded(fmt, second[name])) for name in first)
    assert sum(d.height for d in decoded.values()) == n


# -- the frontier and the high-water mark ----------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(walls, st.integers(1, 5), st.booleans()), min_size=1, max_size=8))
def test_the_high_water_mark_is_the_lowest_span_frontier_and_a_stale_epoch_moves_nothing(tmp_path_factory, steps):
    from feedctl.coordinator import fenced
    from feedctl.coordinator.frontier import Frontier
    from feedctl.node.settings import RunReport
    from feedctl.state import batch_intents, jobs, spans
    from feedctl.state.store import StateStore

    root = tmp_path_factory.mktemp("state")
    store = StateStore(f"sqlite:///{root}/state.db", root)
    with store.transaction() as conn:
        job = jobs.create_job(
            conn, "f", "sha256:x", definition("s.a", "s.b"), "file://x", Hlc(S), {"s.a": (0, 2), "s.b": (0, 3)}
        )
        epoch = jobs.claim_lease(conn, job.job_id, "n/1", 60)
        spans.ensure(conn, job.job_id, {"s.a": 2, "s.b": 3}, 0, Hlc(0))
        for s in spans.of_job(conn, job.job_id):  # two nodes, each emitting its spans on its own
            spans.assign(conn, job.job_id, s, "n1" if s.span % 2 else "n2", "placed")
    options = definition(initial_scan="no").options
    frontier = Frontier(
        store,
        job,
        epoch,
        options,
        None,
        [],
        None,
        RunReport("f", job.job_id, "running"),
        lambda *a, **k: None,
        lambda what, action: action(),
    )
    stale_frontier = Frontier(
        store,
        job,
        epoch - 1,
        options,
        None,
        [],
        None,
        RunReport("f", job.job_id, "running"),
        lambda *a, **k: None,
        lambda what, action: action(),
    )
    current, seq = Hlc(0), 0
    for wall, lagging, stale in sorted(steps):
        target = Hlc(wall)
        with store.transaction() as conn:
            try:
                intent = fenced.cut(
                    conn, job.job_id, epoch - 1 if stale else epoch, "changes", target, {"s.a": (0, wall % 7)}
                )
                assert not stale, "a batch cut under a lost lease"
            except jobs.LeaseLost:
                assert stale
                continue
        seq = intent.batch_seq
        with store.transaction() as conn:  # n1 emits; n2 only every other batch (`lagging` odd: it waits)
            spans.emitted(conn, [spans.Emitted(job.job_id, "n1", [("s.a", 1), ("s.b", 1)], seq, target, seq - 1)])
            if lagging % 2 == 0:
                for s in [x for x in spans.of_job(conn, job.job_id) if x.node == "n2"]:
                    for k in range(s.batch_seq + 1, seq + 1):
                        target_k = batch_intents.intent(conn, job.job_id, k).target
                        spans.emitted(conn, [spans.Emitted(job.job_id, "n2", [s.key], k, target_k, k - 1)])
        try:
            stale_frontier.advance()
        except jobs.LeaseLost:
            pass
        with store.transaction() as conn:
            assert jobs.get_job(conn, job.job_id).high_water == current, "a stale epoch moved the high-water mark"
        frontier.advance()
        with store.transaction() as conn:
            rows = spans.of_job(conn, job.job_id)
            lowest = min(rows, key=lambda s: s.batch_seq)
            high_water = jobs.get_job(conn, job.job_id).high_water
            # the high-water mark is the target of the last batch every span emitted, never more
            assert high_water == (lowest.frontier if lowest.batch_seq else Hlc(0))
            assert batch_intents.last_done(conn, job.job_id) == min(s.batch_seq for s in rows)
            assert high_water >= current
            current = high_water
    store.close()


# -- verify reads what the encoder writes ----------------------------------------------------------------

texts = st.one_of(st.none(), st.text(max_size=12))
ROW = pa.struct([("id", pa.int64()), ("a", pa.string()), ("b", pa.string())])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**9), texts, texts, st.booleans()), min_size=1, max_size=20),
    st.sampled_from(["wrapped", "bare"]),
)
def test_verify_parses_every_message_the_encoder_writes(rows, envelope):
    import polars as pl

    from feedctl.encoding.json import encode_values
    from feedctl.sinks.messages import MessageSpec, canonical, parse_message

    after = [None if deleted else {"id": i, "a": a, "b": b} for i, a, b, deleted in rows]
    before = [{"id": i, "a": b, "b": a} for i, a, b, _ in rows]
    n = len(rows)
    df = pl.from_arrow(
        pa.table(
            {
                frame.AFTER: pa.array(after, ROW),
                frame.BEFORE: pa.array(before, ROW),
                frame.KEY: pa.array([{"id": i} for i, *_ in rows], pa.struct([("id", pa.int64())])),
                frame.TS_WALL: pa.array([S + k for k in range(n)], pa.int64()),
                frame.TS_LOGICAL: pa.array([k % 3 for k in range(n)], pa.int32()),
                frame.MVCC_WALL: pa.array([S] * n, pa.int64()),
            }
        )
    )
    diff = envelope == "wrapped"  # a bare message carries no `before`
    lines = encode_values(df, Envelope(envelope, diff=diff, updated=True, key_in_value=True)).to_list()
    spec = MessageSpec(envelope, diff, True, Hlc(S), ".ndjson", "flat")
    for k, line in enumerate(lines):
        key, ts, got_after, got_before = parse_message(line, spec)
        assert key == canonical([rows[k][0]]) and ts == Hlc(S + k, k % 3)
        assert got_after == (None if after[k] is None else canonical(after[k]))
        assert got_before == (canonical(before[k]) if diff else None)


def test_an_avro_file_cut_from_pieces_of_several_batches_holds_them_all(tmp_path_factory):
    # Pieces of three batches in one file: polars could not write their concatenation as it came.
    written = _emit(tmp_path_factory, _rows(14, 1), 200, None, "avro", [12, 13])
    assert sum(_decoded("avro", body).height for body in written.values()) == 14


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_files_bytes_as_emitted_are_its_messages_and_as_flushed_the_file_stored(tmp_path, compression):
    """`changefeed_emitted_bytes` counts the messages as encoded, `changefeed_flushed_bytes` the files as the
    folder holds them: the same without compression, and what gzip made of them with it."""
    sink = open_sink(
        f"file://{tmp_path}", {"file_size": 700, "partition_format": "flat", "compression": compression}, str(tmp_path)
    )
    emitter = writer(sink.target("s.t", "t", 1, 9, 4, "json", Envelope(updated=True, key_in_value=True)))
    emitter.add(pl.from_arrow(_rows(60, 2)))
    results = emitter.finish()
    stored = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(results) == len(stored) > 2
    for r in results:
        body = stored[r["file"].rsplit("/", 1)[-1]]
        assert r["bytes"] == len(body)
        assert r["emitted"] == len(gzip.decompress(body) if compression else body)
    assert (sum(r["emitted"] for r in results) > sum(r["bytes"] for r in results)) == (compression is not None)
