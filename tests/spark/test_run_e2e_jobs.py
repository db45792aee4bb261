"""`feedctl run` end to end: where a job starts and stops (initial_scan, cursor, end_time), job control
through the CLI, a changed feed definition, and bad run-time inputs. Real Spark, real Delta tables.
"""

from __future__ import annotations

import json
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from support import Cli
from support.e2e import (
    Table,
    assert_verified,
    check_changes,
    file_sink,
    hlc,
    job_of,
    jobs,
    messages,
    read_sink,
    run,
    sink_dir,
    write_feeds,
    write_project,
)

COLUMNS = {"id": "int64", "name": "string", "v": "int64"}


def rows(*ids: int, v: int = 0) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "v": v + i} for i in ids]


def one_feed(tmp_path, options: dict | None = None, query: str | None = None, changes: str = "auto"):
    """A table `s.t` (ids 1..3, its `changes` read as said) and one feed `f` with `updated` into sink `out`
    (with `query`, a CDC query's text)."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3))
    feed = {"name": "f", "sink": "out", "options": {"updated": True, **(options or {})}}
    feed.update({"query": "f.sql"} if query else {"tables": ["s.t"]})
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2, "changes": changes}},
        [feed],
        [file_sink("out")],
        files={"feeds/f.sql": query} if query else None,
    )
    return t, root, feed


def sink_state(root):
    """What must not move when a run fails: the files in the sink and the job's high-water mark."""
    return [(f.name, f.raw) for f in read_sink(sink_dir(root, "out"))], job_of(root, "f")["high_water_timestamp"]


# --- where a job starts and stops ----------------------------------------------------------------------


def test_initial_scan_cursor_and_end_time(tmp_path):
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3))
    for change in (lambda: t.append(rows(4)), lambda: t.update("id = 1", v="v + 10"), lambda: t.delete("id = 2")):
        time.sleep(0.01)  # distinct commit milliseconds, so a timestamp falls between two versions
        change()
    assert t.version == 3
    between = (t.commit_ns(2) + t.commit_ns(3)) // 2
    feeds = {
        "scan_yes": {},
        "scan_no": {"initial_scan": "no"},
        "scan_only": {"initial_scan": "only"},
        "cursor_version": {"cursor": "version:1"},
        "cursor_hlc": {"cursor": f"{t.commit_ns(1)}.0000000000"},
        "until": {"cursor": "version:0", "end_time": str(between)},
    }
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [
            {
                "name": name,
                "tables": ["s.t"],
                "sink": name,
                "options": {**({} if name == "scan_only" else {"updated": True}), **options},
            }
            for name, options in feeds.items()
        ],
        [file_sink(name) for name in feeds],
    )
    # end_time is only a few milliseconds old: without a closed lag the run need not wait for time to close it
    reports = run(root, closed_lag=0.0)
    assert {n: r.status for n, r in reports.items()} == {
        **{n: "running" for n in feeds},
        "scan_only": "succeeded",
        "until": "succeeded",
    }
    snapshot = [(3, k, None, r) for k, r in t.snapshot(3).items()]
    time.sleep(0.01)
    t.append(rows(5))
    reports = run(root, closed_lag=0.0)
    assert reports["scan_only"].status == "succeeded" and reports["until"].status == "succeeded"
    assert reports["scan_only"].batches == reports["until"].batches == 0

    check_changes(messages(root, "scan_yes"), snapshot + t.changes(3), t)
    check_changes(messages(root, "scan_no"), t.changes(3), t)
    check_changes(messages(root, "cursor_version"), t.changes(1), t)  # after version 1
    check_changes(messages(root, "cursor_hlc"), t.changes(1), t)  # after version 1's commit time
    until = messages(root, "until")
    check_changes(until, t.changes(0, 2), t)  # versions 1 and 2; 3 is after end_time
    assert all(hlc(m["updated"])[0] <= between for m in until)
    only = messages(root, "scan_only")
    assert sorted((m["key"], m["after"]) for m in only) == sorted(([k[0]], r) for k, r in t.snapshot(3).items())
    statuses = {j["feed"]: j["status"] for j in jobs(root)}
    assert statuses["scan_only"] == statuses["until"] == "succeeded"
    assert hlc(job_of(root, "until")["high_water_timestamp"]) == (between, 0)
    assert_verified(root, *feeds)


# --- job control ----------------------------------------------------------------------------------------


def test_pause_resume_and_cancel_through_the_cli(tmp_path):
    t, root, _ = one_feed(tmp_path)
    cli = Cli(root)
    assert cli("run").exit_code == 0
    job = job_of(root, "f")
    assert job["status"] == "running"

    result = cli("pause", "f")
    assert result.exit_code == 0 and job_of(root, "f")["status"] == "paused"
    t.update("id = 1", v="v + 10")
    before = sink_state(root)
    result = cli("run")
    assert result.exit_code == 0  # a paused job is skipped, not an error
    assert sink_state(root) == before and job_of(root, "f")["status"] == "paused"

    result = cli("resume", str(job["job_id"]))
    assert result.exit_code == 0 and job_of(root, "f")["status"] == "running"
    t.delete("id = 2")
    assert run(root)["f"].status == "running"
    snapshot = [(0, k, None, r) for k, r in t.snapshot(0).items()]
    check_changes(messages(root, "out"), snapshot + t.changes(0), t)  # nothing lost while paused

    for args, words in (
        (("resume", "f"), ["running"]),
        (("pause", "no_such_feed"), ["no_such_feed"]),
        (("cancel", "12345"), ["12345"]),
    ):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert all(w in result.output for w in words) and "Traceback" not in result.output

    assert cli("cancel", "f").exit_code == 0 and job_of(root, "f")["status"] == "canceled"
    assert cli("cancel", "f").exit_code == 2  # a canceled job stays canceled
    before = sink_state(root)
    report = run(root)["f"]
    assert report.status == "canceled" and report.job_id == job["job_id"] and sink_state(root) == before
    report = run(root, new_job=True, rescan=True)["f"]  # `feedctl run --new-job --rescan`
    assert report.status == "running" and report.job_id != job["job_id"]
    assert [(j["job_id"], j["status"]) for j in jobs(root)] == [(job["job_id"], "canceled"), (report.job_id, "running")]
    assert report.messages == 2  # the new job's initial scan: ids 1 and 3


def test_a_changed_feed_is_refused_until_its_job_is_canceled(tmp_path):
    t, root, feed = one_feed(tmp_path)
    run(root)
    job = job_of(root, "f")
    write_feeds(root, [{**feed, "description": "edited", "tags": ["new"]}])  # not part of the definition
    assert Cli(root)("run").exit_code == 0 and job_of(root, "f")["job_id"] == job["job_id"]
    t.update("id = 1", v="v + 10")
    write_feeds(root, [{**feed, "options": {**feed["options"], "full_table_name": True}}])  # names its files
    before = sink_state(root)
    result = Cli(root)("run")
    assert result.exit_code == 1
    assert "feedctl cancel f" in result.output and str(job["job_id"]) in result.output
    assert sink_state(root) == before and job_of(root, "f")["status"] == "running"

    assert Cli(root)("cancel", "f").exit_code == 0
    assert Cli(root)("run", "--new-job", "--rescan").exit_code == 0
    new = job_of(root, "f")
    assert new["job_id"] != job["job_id"] and new["status"] == "running"
    latest = [f for f in read_sink(sink_dir(root, "out")) if f"{new['job_id']:016x}" in f.name]
    assert latest and all("-s.t-" in f.name for f in latest)  # the new definition: full table names
    assert sorted(m["key"] for f in latest for m in f.lines) == [[1], [2], [3]]


def test_options_changed_in_place_keep_the_job(tmp_path):
    """Every option a cloud-storage feed takes in place changed in the YAML of a running feed, on JSON and
    Parquet: the job takes them from its next batch, keeping its id and high-water mark; batches before keep
    the old ones; verify judges each message by the options of its batch. Back again, the same."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3))
    feed = {
        "name": "f",
        "tables": ["s.t"],
        "sink": "out",
        "options": {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"},
    }
    typed = {**feed, "name": "p", "sink": "pq", "options": {**feed["options"], "format": "parquet"}}
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"]}},
        [feed, typed],
        [file_sink("out"), file_sink("pq")],
    )
    run(root)
    t.update("id = 1", v="v + 10")
    run(root)
    job = job_of(root, "f")
    count = len(messages(root, "out"))

    # every option a cloud-storage feed takes in place (key_in_value is always on there, topic_in_value never)
    changes = {
        "diff": True,
        "mvcc_timestamp": True,
        "batch_rows": 1000,
        "batch_bytes": "64MiB",
        "resolved": "5s",
        "min_checkpoint_frequency": "1s",
        "on_error": "pause",
    }

    def tuned(f):
        return {**f, "options": {**f["options"], **changes}}

    write_feeds(root, [tuned(feed), tuned(typed)])
    t.update("id = 2", v="v + 10")
    result = Cli(root)("run", json_logs=True)
    assert result.exit_code == 0, result.output
    changed = [e for e in map(json.loads, result.stdout.splitlines()) if e.get("event") == "options_changed"]
    assert [(e["feed"], e["options"]) for e in changed] == [
        (f, {**changes, "batch_bytes": 64 * 2**20}) for f in ("f", "p")
    ]
    assert job_of(root, "f")["high_water_timestamp"] > job["high_water_timestamp"]
    assert job_of(root, "f")["job_id"] == job["job_id"]
    emitted = messages(root, "out")
    assert all("before" not in m and "mvcc_timestamp" not in m for m in emitted[:count])
    assert [(m["key"], m["before"]["v"], m["after"]["v"]) for m in emitted[count:]] == [([2], 2, 12)]
    assert "mvcc_timestamp" in emitted[-1]
    parquet = [pq.read_schema(path).names for path in sorted(sink_dir(root, "pq").rglob("*.parquet"))]
    assert ["__crdb__before" in names for names in parquet] == [False] * (len(parquet) - 1) + [True]
    assert_verified(root, "f", "p")

    write_feeds(root, [feed, typed])  # and back: diff off from the next batch
    t.update("id = 3", v="v + 10")
    run(root)
    emitted = messages(root, "out")
    assert emitted[-1]["key"] == [3] and "before" not in emitted[-1]
    assert job_of(root, "f")["job_id"] == job["job_id"]
    assert_verified(root, "f", "p")
    check_changes(emitted, [(0, k, None, r) for k, r in t.snapshot(0).items()] + t.changes(0), t)

    # `updated` too; but messages without it cannot be placed in the history, and verify says which
    write_feeds(root, [{**feed, "options": {**feed["options"], "updated": False}}, typed])
    t.update("id = 1", v="v + 10")
    run(root)
    assert "updated" not in messages(root, "out")[-1]
    write_feeds(root, [feed, typed])
    run(root)
    result = Cli(root)("verify", "f")
    assert result.exit_code == 2 and "does not set `updated: true` before batch" in result.output, result.output


# --- bad input at run time --------------------------------------------------------------------------------


def two_tables(tmp_path, tables: list[str]):
    """Tables s.t (ids 1–3) and s.u (ids 10, 11), and a project whose feed f reads `tables` of them."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2, 3))
    u = Table(tmp_path / "data" / "u", COLUMNS, ["id"], rows(10, 11))
    feed = {
        "name": "f",
        "tables": tables,
        "sink": "out",
        "options": {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"},
    }
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"]}, "u": {"path": str(u.path), "primary_key": ["id"]}},
        [feed],
        [file_sink("out")],
    )
    return t, u, feed, root


def test_tables_added_to_and_dropped_from_a_running_feed(tmp_path):
    """A table added to a plain feed's `tables` is scanned alone in a batch of its own, above everything the
    job emitted before, then followed; a table dropped is emitted no more. The job keeps its id, the plan
    says what happens, and verify is clean throughout."""
    t, u, feed, root = two_tables(tmp_path, ["s.t"])
    cli = Cli(root)
    run(root)
    t.update("id = 1", v="v + 10")
    run(root)
    job = job_of(root, "f")
    count = len(messages(root, "out"))

    write_feeds(root, [{**feed, "tables": ["s.t", "s.u"]}])
    [planned] = json.loads(cli("plan", "--format", "json").stdout)["feeds"]
    assert planned["change"] == "in-place"
    assert planned["diff"] == ['tables: ["s.t"] → ["s.t", "s.u"] (s.u scanned alone, then followed)']
    u.update("id = 10", v="v + 1")  # before the job takes the table: its scan has it
    result = cli("run", json_logs=True)
    assert result.exit_code == 0, result.output
    events = [e.get("event") for e in map(json.loads, result.stdout.splitlines())]
    assert "table_added" in events and "table_scan" in events
    assert job_of(root, "f")["job_id"] == job["job_id"]
    scanned = messages(root, "out")[count:]
    assert sorted((m["key"], m["after"]["v"]) for m in scanned) == [([10], 11), ([11], 11)]
    assert min(hlc(m["updated"]) for m in scanned) > hlc(job["high_water_timestamp"])
    assert_verified(root, "f")

    u.update("id = 11", v="v + 1")
    t.update("id = 2", v="v + 10")
    run(root)
    assert sorted(m["key"] for m in messages(root, "out")[count + 2 :]) == [[2], [11]]
    assert_verified(root, "f")

    write_feeds(root, [{**feed, "tables": ["s.u"]}])
    result = cli("run", json_logs=True)
    assert result.exit_code == 0 and '"event": "table_dropped"' in result.stdout, result.output
    emitted = len(messages(root, "out"))
    t.update("id = 3", v="v + 10")  # no longer followed
    u.update("id = 10", v="v + 1")
    run(root)
    assert [m["key"] for m in messages(root, "out")[emitted:]] == [[10]]
    assert job_of(root, "f")["job_id"] == job["job_id"]
    assert_verified(root, "f")
    # a table is not added back to the job that dropped it
    write_feeds(root, [{**feed, "tables": ["s.u", "s.t"]}])
    result = cli("run")
    assert result.exit_code == 1 and "a table is not added back to a job in place" in result.output


def test_continuing_without_loss_from_the_command_line(tmp_path):
    """A new job continues where the canceled one stopped (`--continue`, `--cursor`); a cursor is where a job
    starts, not part of its feed's definition; a rescan into the folder the old job wrote needs `--rescan`;
    a job that would write files sorting below a RESOLVED file already in its folder is refused."""
    t, root, feed = one_feed(tmp_path, {"resolved": "0s", "min_checkpoint_frequency": "0s"})
    cli = Cli(root)
    run(root)
    t.update("id = 1", v="v + 10")
    run(root)
    first = job_of(root, "f")
    assert cli("cancel", "f").exit_code == 0
    t.update("id = 2", v="v + 10")  # while no job runs

    before = sink_state(root)
    result = cli("run", "--new-job")
    assert result.exit_code == 1 and sink_state(root) == before
    assert f"emitted every change up to {first['high_water_timestamp']}" in result.output
    assert "--continue" in result.output and "--rescan" in result.output
    result = cli("run", "--continue")
    assert result.exit_code == 1 and "add --new-job" in result.output and sink_state(root) == before

    assert cli("run", "--new-job", "--continue").exit_code == 0
    second = job_of(root, "f")
    assert second["job_id"] != first["job_id"] and second["status"] == "running"
    # nothing scanned again, nothing lost between the jobs: every change once, in order
    check_changes(messages(root, "out"), [(0, k, None, r) for k, r in t.snapshot(0).items()] + t.changes(0), t)

    # a cursor set in the YAML for a job's start: removing it later changes nothing
    assert cli("cancel", "f").exit_code == 0
    write_feeds(root, [{**feed, "options": {**feed["options"], "cursor": second["high_water_timestamp"]}}])
    third = run(root, new_job=True)["f"]
    assert third.status == "running" and third.job_id != second["job_id"]
    write_feeds(root, [feed])
    t.delete("id = 3")
    assert run(root)["f"].job_id == third.job_id
    check_changes(messages(root, "out"), [(0, k, None, r) for k, r in t.snapshot(0).items()] + t.changes(0), t)

    # the slip: a rescan writes a RESOLVED file above the old high-water mark; continuing from that mark
    # would write files below it, which a consumer that read up to it never sees
    assert cli("cancel", "f").exit_code == 0
    assert cli("run", "--new-job", "--rescan").exit_code == 0
    old = job_of(root, "f")["high_water_timestamp"]
    assert cli("cancel", "f").exit_code == 0
    before = sink_state(root)
    result = cli("run", "--new-job", "--cursor", str(third.high_water))
    assert result.exit_code == 1 and sink_state(root) == before
    assert "would write files that sort below" in result.output and ".RESOLVED" in result.output
    assert f"--cursor {old}" in result.output
    assert cli("run", "--new-job", "--cursor", old).exit_code == 0

    # the folder as its consumer reads it, across the five jobs: nothing lost between them
    result = cli("verify", "f", "--all-jobs")
    assert result.exit_code == 0 and "verify f across its 5 jobs" in result.output, result.output
    # a cursor past a change made while no job ran: each job alone is whole, the folder is not
    assert cli("cancel", "f").exit_code == 0
    t.update("id = 1", v="v + 10")
    assert cli("run", "--new-job", "--cursor", str(time.time_ns())).exit_code == 0
    assert cli("verify", "f").exit_code == 0
    result = cli("verify", "f", "--all-jobs")
    assert result.exit_code == 1 and "gaps between jobs                  1" in result.output, result.output
    assert "without a scan: changes between them are in neither job's files" in result.output


def test_a_new_job_scans_one_table_alone_to_recover_it(tmp_path):
    """`run --new-job --continue --scan-table T`: the new job continues from the previous one's high-water mark
    and scans T alone at its start, above everything emitted before (the recovery of a table whose rows a
    consumer lost), while the feed's other tables are not scanned again; then both are followed."""
    t, u, feed, root = two_tables(tmp_path, ["s.t", "s.u"])
    cli = Cli(root)
    run(root)
    u.update("id = 10", v="v + 1")
    run(root)
    first = job_of(root, "f")
    assert cli("cancel", "f").exit_code == 0
    count = len(messages(root, "out"))

    assert cli("run", "--scan-table", "s.u").exit_code == 2
    result = cli("run", "--new-job", "--continue", "--scan-table", "s.x")
    assert result.exit_code == 1 and "--scan-table s.x is not one of its tables (s.t, s.u)" in result.output
    result = cli("run", "--new-job", "--continue", "--scan-table", "s.u", json_logs=True)
    assert result.exit_code == 0, result.output
    second = job_of(root, "f")
    assert second["job_id"] != first["job_id"]
    scanned = messages(root, "out")[count:]
    assert sorted((m["key"], m["after"]["v"]) for m in scanned) == [([10], 11), ([11], 11)], "u alone, whole"
    assert min(hlc(m["updated"]) for m in scanned) > hlc(first["high_water_timestamp"])

    t.update("id = 1", v="v + 10")
    u.update("id = 11", v="v + 1")
    run(root)
    assert sorted(m["key"] for m in messages(root, "out")[count + 2 :]) == [[1], [11]]
    assert_verified(root, "f")
    result = cli("verify", "f", "--all-jobs")
    assert result.exit_code == 0, result.output


def test_a_new_job_scanning_a_table_made_after_the_job_before_follows_it_from_its_first_version(tmp_path):
    """`--scan-table T` where T was made after the previous job's high-water mark: T has no version where the
    new job starts, so nothing is scanned and its first commits are its rows, each emitted once."""
    t = Table(tmp_path / "data" / "t", COLUMNS, ["id"], rows(1, 2))
    feed = {
        "name": "f",
        "tables": ["s.t"],
        "sink": "out",
        "options": {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"},
    }
    tables = {"t": {"path": str(t.path), "primary_key": ["id"]}}
    root = write_project(tmp_path / "p", tables, [feed], [file_sink("out")])
    run(root)
    first = job_of(root, "f")
    assert Cli(root)("cancel", "f").exit_code == 0
    count = len(messages(root, "out"))

    u = Table(tmp_path / "data" / "u", COLUMNS, ["id"], rows(10, 11))  # made after the job's high-water mark
    u.update("id = 10", v="v + 1")
    write_project(
        root,
        {**tables, "u": {"path": str(u.path), "primary_key": ["id"]}},
        [{**feed, "tables": ["s.t", "s.u"]}],
        [file_sink("out")],
    )
    result = Cli(root)("run", "--new-job", "--continue", "--scan-table", "s.u")
    assert result.exit_code == 0, result.output
    assert job_of(root, "f")["job_id"] != first["job_id"]
    emitted = sorted((hlc(m["updated"]), m["key"], m["after"]["v"]) for m in messages(root, "out")[count:])
    assert [(k, v) for _, k, v in emitted] == [([10], 10), ([11], 11), ([10], 11)], "u's commits, once each"
    assert emitted[0][0] == emitted[1][0] < emitted[2][0]
    assert Cli(root)("verify", "f", "--all-jobs").exit_code == 0


def test_a_table_that_does_not_exist(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(tmp_path / "nowhere"), "primary_key": ["id"]}},
        [{"name": "f", "tables": ["s.t"], "sink": "out"}],
        [file_sink("out")],
    )
    report = run(root)["f"]
    assert report.status == "error" and report.job_id is None
    assert "s.t" in report.error and str(tmp_path / "nowhere") in report.error
    assert jobs(root) == [] and not sink_dir(root, "out").exists()
    assert Cli(root)("run").exit_code == 1


@pytest.mark.parametrize("on_error", ["fail", "pause"])
def test_a_table_deleted_while_its_job_runs(tmp_path, on_error):
    t, root, _ = one_feed(tmp_path, {"on_error": on_error})
    run(root)
    t.update("id = 1", v="v + 10")
    before = sink_state(root)
    shutil.rmtree(t.path)
    result = Cli(root)("run")
    assert result.exit_code == 1
    job = job_of(root, "f")
    assert job["status"] == {"fail": "failed", "pause": "paused"}[on_error]
    assert "s.t" in job["error"] and str(t.path) in job["error"]
    assert sink_state(root) == before


def test_a_table_without_change_data_feed_read_from_it_alone(tmp_path):
    path = tmp_path / "data" / "t"
    write_deltalake(str(path), pa.Table.from_pylist(rows(1, 2)))
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(path), "primary_key": ["id"], "changes": "cdf"}},
        [{"name": "f", "tables": ["s.t"], "sink": "out"}],
        [file_sink("out")],
    )
    report = run(root)["f"]
    assert report.status == "error" and report.job_id is None
    assert "s.t" in report.error and "version 0" in report.error and "delta.enableChangeDataFeed" in report.error
    assert jobs(root) == [] and not sink_dir(root, "out").exists()


def test_change_data_feed_turned_off_while_the_job_runs(tmp_path):
    """Read from the change data feed alone, the job fails at the version that turned it off; read as `auto`,
    it goes on from the log."""
    t, root, _ = one_feed(tmp_path, changes="cdf")
    run(root)
    t.dt().alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    t.update("id = 1", v="v + 10")
    before = sink_state(root)
    report = run(root)["f"]
    assert report.status == "failed" and "s.t" in report.error and "1..2" in report.error
    assert sink_state(root) == before
    t, root, _ = one_feed(tmp_path / "auto")
    run(root)
    t.dt().alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    t.update("id = 1", v="v + 10")
    assert run(root)["f"].status == "running"
    assert [(m["key"], m["after"]["v"]) for m in messages(root, "out")][-1] == ([1], 11)
    assert_verified(root, "f")


def test_versions_no_longer_in_the_log(tmp_path):
    """A checkpoint, then `cleanup_metadata` with a zero log retention, removes the JSON commits the job
    has not read yet: their changes are gone, and the job must say so instead of skipping them."""
    t, root, _ = one_feed(tmp_path)
    t.dt().alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})  # version 1
    run(root)
    t.append(rows(4))
    t.append(rows(5))
    t.append(rows(6))
    dt = t.dt()
    dt.create_checkpoint()
    dt.cleanup_metadata()
    assert not (t.path / "_delta_log" / "00000000000000000001.json").exists()
    before = sink_state(root)
    report = run(root)["f"]
    assert report.status == "failed" and "s.t" in report.error and "2..3" in report.error
    assert sink_state(root) == before


def test_data_files_vacuumed_before_the_job_read_them(tmp_path):
    """An append, then an update that rewrites the appended file, then VACUUM with no retention: the
    version that added the file is still in the log, but its data is gone."""
    t, root, _ = one_feed(tmp_path)
    run(root)
    t.append(rows(4))
    t.update("id = 4", v="v + 10")
    t.dt().vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    before = sink_state(root)
    report = run(root)["f"]
    assert report.status == "failed" and "s.t" in report.error and "versions 1..4" in report.error
    assert sink_state(root) == before


def test_a_job_behind_a_vacuum_is_warned_of_fails_at_once_and_verify_judges_what_remains(tmp_path):
    """The history headroom of a job whose table keeps nothing (a retention of 0 s) is gone as soon as a
    version it needs is committed: `retention` says so; after a VACUUM the job fails with the way on, verify
    judges the history that remains and says what it could not read, and a new job that scans again runs.
    Read from the log, the update needs the file it removed (delta-rs's VACUUM keeps change data files)."""
    t, root, _ = one_feed(tmp_path, changes="log")
    run(root)  # the scan of version 0: ids 1..3, in a file no later version removes
    t.append(rows(4))  # 1: a file of its own
    t.dt().alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 seconds"})  # 2
    run(root)
    t.update("id = 4", v="v + 10")  # 3: rewrites the file of version 1
    cli = Cli(root)
    needed = json.loads(cli("retention", "s.t", "--json").stdout)
    assert needed["needed_version"] == 3 and needed["low"] and needed["headroom_seconds"] <= 0
    status = json.loads(cli("status", "f", "--json").stdout)
    assert [(h["table"], h["needed_version"], h["low"]) for h in status["history_headroom"]] == [("s.t", 3, True)]

    t.dt().vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    report = run(root)["f"]
    assert (
        report.status == "failed" and "versions 3..5: a data file is gone (vacuumed?)" in report.error
    )  # 4, 5: the VACUUM
    assert "feedctl run --new-job --rescan -s FEED" in report.error
    result = cli("verify", "f")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "NOT ALL JUDGED" in result.output and "s.t: version 1:" in result.output, result.output
    judged = json.loads(cli("verify", "f", "--json").stdout)
    assert judged["unjudged_messages"] == 1  # id 4's insert, whose file is gone
    assert not any(c["count"] for c in judged["checks"].values())  # the scan's three rows, judged

    assert cli("run", "--new-job", "--rescan", "-s", "f").exit_code == 0
    assert cli("verify", "f").exit_code == 0


@pytest.mark.parametrize("query", [None, "SELECT id, v FROM {{ source('s', 't') }} WHERE v > 0"])
def test_a_scan_whose_data_file_is_gone_fails_without_retries(tmp_path, query):
    """The scan's tasks read the snapshot themselves: a data file gone from under it is a source error,
    reported as such and not retried. With a CDC query, the task that reads it feeds Spark's query, whose
    writing task returns it: the same error, whatever the query keeps."""
    from feedctl.commands.run import run_feeds
    from feedctl.node.settings import RunSettings

    t, root, _ = one_feed(tmp_path, query=query)
    for data in t.path.glob("*.parquet"):
        data.unlink()
    events = []
    [report] = run_feeds(
        root,
        None,
        RunSettings(retries=3, retry_backoff=0.01),
        log=lambda message, **fields: events.append(fields.get("event")),
    )
    assert report.status == "failed" and "s.t" in report.error and "gone" in report.error, report.error
    assert "retry" not in events
    assert not sink_dir(root, "out").exists() or not list(sink_dir(root, "out").rglob("*.ndjson"))


def test_a_column_mapping_table_is_followed(tmp_path):
    """A column-mapping table (deltalake writes one): its files name columns by physical names, its messages
    by the logical ones; scanned, then followed through an update and an append, and verified."""
    from deltalake import DeltaTable

    path = tmp_path / "data" / "t"
    write_deltalake(
        str(path),
        pa.Table.from_pylist(rows(1, 2)),
        configuration={
            "delta.enableChangeDataFeed": "true",
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )
    fields = json.loads(DeltaTable(str(path)).schema().to_json())["fields"]
    assert all(f["metadata"]["delta.columnMapping.physicalName"] != f["name"] for f in fields)
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(path), "primary_key": ["id"]}},
        [{"name": "f", "tables": ["s.t"], "sink": "out", "options": {"updated": True}}],
        [file_sink("out")],
    )
    assert not run(root)["f"].error
    DeltaTable(str(path)).update(predicate="id = 1", updates={"v": "v + 10"})
    write_deltalake(str(path), pa.Table.from_pylist(rows(3)), mode="append")
    assert not run(root)["f"].error
    assert sorted((m["key"][0], m["after"]["v"]) for m in messages(root, "out")) == [(1, 1), (1, 11), (2, 2), (3, 3)]
    assert_verified(root, "f")
