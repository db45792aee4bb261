"""`feedctl verify` is itself tested: a clean sink passes, and a sink with a dropped file, a dropped line,
reordered updates of one key, a message after a lower resolved timestamp, a misnamed file, a duplicated
file or an edited value fails with the report that names it.

One project is run once (a scan, then three batches of updates, deletes and inserts, resolved files at
every checkpoint); each test tampers with a copy of it.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from feedctl.sinks import naming
from feedctl.sinks.messages import parse_hlc
from feedctl.units import Hlc
from feedctl.verify.feed import verify_feed
from support import Cli
from support.e2e import Table, file_sink, read_sink, run, sink_dir, write_project

COLUMNS = {"id": "int64", "name": "string", "v": "int64", "price": "decimal"}


def rows(*ids: int, v: int = 0) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "v": v + i, "price": None} for i in ids]


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("verify")
    t = Table(base / "data" / "t", COLUMNS, ["id"], rows(*range(1, 9)))
    root = write_project(
        base / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [
            {
                "name": "all",
                "tables": ["s.t"],
                "sink": "all",
                "options": {"updated": True, "diff": True, "resolved": "0s", "min_checkpoint_frequency": "0s"},
            },
            {
                "name": "big",
                "query": "big.sql",
                "sink": "big",
                "options": {"updated": True, "diff": True, "initial_scan": "no", "envelope": "wrapped"},
            },
        ],
        [file_sink("all", file_size="1MiB"), file_sink("big", compression="gzip")],
        files={
            "feeds/big.sql": "SELECT id, v * 10 AS v10, event_op() AS op FROM {{ source('s', 't') }} "
            "WHERE v >= 5 AND event_op() != 'delete'"
        },
    )
    run(root)
    for step in range(3):
        t.update("id <= 2", v=f"v + {10 + step}")  # two updates of ids 1 and 2 per batch
        t.update("id = 1", v="v + 1")
        t.delete(f"id = {3 + step}")
        t.append(rows(20 + step, v=step))
        run(root)
    return root


@pytest.fixture
def project(ran, tmp_path) -> Path:
    copy = tmp_path / "p"
    shutil.copytree(ran, copy)
    return copy


def data_files(root: Path, sink: str = "all"):
    return [f for f in read_sink(sink_dir(root, sink)) if not f.resolved]


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(m) + "\n" for m in lines))


def test_a_clean_sink_passes(ran):
    told = []
    report = verify_feed(ran, "all", progress=told.append)
    assert report.ok, "\n".join(report.lines())
    assert told == [
        f"job {report.job_id}: reading the tables' change history",
        f"job {report.job_id}: {report.expected:,} changes expected; reading the sink",
    ], told
    assert report.messages == report.expected > 8  # the scan, then every change once
    assert report.resolved_files >= 3 and report.duplicates == 0
    assert report.fingerprint_keys >= 8

    result = Cli(ran)("verify", "all", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["ok"] and all(c["count"] == 0 for c in out["checks"].values())

    text = Cli(ran)("verify", "all")
    assert text.exit_code == 0 and text.output.rstrip().endswith("OK")


def test_a_cdc_query_feed_passes_and_only_its_rows_count(ran):
    report = verify_feed(ran, "big")
    assert report.ok, "\n".join(report.lines())
    messages = [m for f in data_files(ran, "big") for m in f.lines]
    assert len(messages) == report.expected > 0
    assert all(m["after"]["v10"] >= 50 and set(m["after"]) == {"id", "v10", "op"} for m in messages)


def test_a_dropped_file_is_reported_missing(project):
    victim = data_files(project)[1]
    (sink_dir(project, "all") / victim.name).unlink()
    report = verify_feed(project, "all")
    assert not report.ok
    assert report.findings["missing"].count == len(victim.lines)
    assert report.findings["order"].count == report.findings["resolved"].count == 0
    assert Cli(project)("verify", "all").exit_code == 1


def test_a_dropped_line_is_reported_missing_with_its_key_and_time(project):
    victim = data_files(project)[-2]
    dropped = victim.lines[0]
    write_lines(sink_dir(project, "all") / victim.name, victim.lines[1:])
    report = verify_feed(project, "all")
    missing = report.findings["missing"]
    assert missing.count == 1
    assert json.dumps(dropped["key"]) in missing.examples[0]["where"].replace(" ", "")
    assert dropped["updated"] in missing.examples[0]["detail"]
    assert "missing changes" in "\n".join(report.lines())


def test_reordered_updates_of_one_key_are_an_order_violation(project):
    # ids 1 and 2 change twice in every batch; their two messages share a span, so one file holds both.
    for f in data_files(project):
        ones = [i for i, m in enumerate(f.lines) if m["key"] == [1]]
        if len(ones) == 2:
            break
    else:
        pytest.fail("no file with two updates of key 1")
    lines = list(f.lines)
    lines[ones[0]], lines[ones[1]] = lines[ones[1]], lines[ones[0]]
    write_lines(sink_dir(project, "all") / f.name, lines)
    report = verify_feed(project, "all")
    assert report.findings["order"].count == 1
    assert report.findings["order"].examples[0]["where"] == f"{f.name}:{ones[1] + 1}"
    assert report.findings["missing"].count == 0


def test_a_message_after_a_lower_resolved_timestamp_is_a_resolved_violation(project):
    last = data_files(project)[-1]
    moved, kept = last.lines[-1], last.lines[:-1]
    write_lines(sink_dir(project, "all") / last.name, kept)
    at = parse_hlc(moved["updated"])
    sink = sink_dir(project, "all")
    (sink / naming.resolved_file(at, "daily")).write_text('{"resolved":"%s"}' % at)
    later = Hlc(at.wall + 1)
    name = naming.partition(later, "daily") + naming.ts33(later) + last.base[33:]
    write_lines(sink / name, [moved])
    report = verify_feed(project, "all")
    resolved = report.findings["resolved"]
    assert resolved.count == 1 and resolved.examples[0]["where"] == f"{name}:1"
    assert str(at) in resolved.examples[0]["detail"]
    assert report.findings["missing"].count == 0


def test_a_misnamed_file_is_a_naming_error_and_its_messages_are_missing(project):
    victim = data_files(project)[0]
    path = sink_dir(project, "all") / victim.name
    path.rename(path.with_name(victim.base.replace(".ndjson", ".json")))
    report = verify_feed(project, "all")
    naming_errors = report.findings["naming"]
    assert naming_errors.count == 1 and "extension '.json', expected '.ndjson'" in naming_errors.examples[0]["detail"]
    assert report.findings["missing"].count == len(victim.lines)


def test_a_file_in_the_wrong_partition_is_a_naming_error(project):
    victim = data_files(project)[0]
    path = sink_dir(project, "all") / victim.name
    (path.parent.parent / "1999-01-01").mkdir()
    path.rename(path.parent.parent / "1999-01-01" / victim.base)
    errors = verify_feed(project, "all").findings["naming"]
    assert errors.count == 1 and "partition" in errors.examples[0]["detail"]


def test_a_duplicate_file_is_reported_and_its_messages_counted_as_duplicates(project):
    victim = data_files(project)[1]
    parts = victim.base.split("-")  # <ts33>-<job>-<batch>-<span>-<file seq>-<topic>-<schema id>.ndjson
    parts[4] = "%08x" % (int(parts[4], 16) + 0x1000)  # another file sequence number of the same batch
    (sink_dir(project, "all") / victim.name).with_name("-".join(parts)).write_bytes(victim.raw)
    report = verify_feed(project, "all")
    assert report.findings["duplicate_files"].count == 1
    assert report.duplicates == len(victim.lines)
    assert not report.ok


def test_an_edited_value_is_a_content_mismatch_and_breaks_the_fingerprint(project):
    last = data_files(project)[-1]
    lines = [dict(m) for m in last.lines]
    # the newest state of its key: files of later batches or other spans hold other keys
    target = next(
        i
        for i in reversed(range(len(lines)))
        if lines[i]["after"] is not None and all(m["key"] != lines[i]["key"] for m in lines[i + 1 :])
    )
    lines[target]["after"] = {**lines[target]["after"], "name": "tampered"}
    write_lines(sink_dir(project, "all") / last.name, lines)
    report = verify_feed(project, "all")
    assert report.findings["content"].count == 1 and "tampered" in report.findings["content"].examples[0]["detail"]
    assert report.findings["fingerprint"].count == 1


def test_a_row_the_query_does_not_select_is_unexpected(project):
    f = data_files(project, "big")[0]
    extra = dict(f.lines[0])
    extra["key"] = [8]  # a row the query selects, but never at that time
    lines = [*f.lines, extra]
    (sink_dir(project, "big") / f.name).write_bytes(
        gzip.compress("".join(json.dumps(m) + "\n" for m in lines).encode())
    )
    report = verify_feed(project, "big")
    assert report.findings["unexpected"].count == 1


def test_verify_refuses_what_it_cannot_check(project):
    result = Cli(project)("verify", "nope")
    assert result.exit_code == 2 and 'no feed named "nope"' in result.output
    result = Cli(project)("verify", "all", "--job", "12345")
    assert result.exit_code == 2 and "no job 12345" in result.output


def test_a_job_in_the_middle_of_its_initial_scan_passes_with_the_rest_not_yet_due(project):
    """As verify finds a job whose scan some spans have emitted and others not yet: the high-water mark
    not moved, the scan not done."""
    from sqlalchemy import update

    from feedctl.project.loader import load_project
    from feedctl.state.schema import jobs
    from feedctl.state.store import StateStore

    scan, *later = sorted(data_files(project), key=lambda f: f.name)
    for f in later:
        (sink_dir(project, "all") / f.name).unlink()
    write_lines(sink_dir(project, "all") / scan.name, scan.lines[:3])  # the rows of the spans that emitted
    for f in sink_dir(project, "all").rglob("*.RESOLVED"):
        f.unlink()
    with StateStore.of_project(load_project(project)[0]).transaction() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.feed == "all")
            .values(initial_scan_done=0, high_water_wall=0, high_water_logical=0)
        )
    report = verify_feed(project, "all")
    assert report.ok, report.lines()
    assert report.messages == 3 and report.above_high_water >= 8
