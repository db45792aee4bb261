"""`feedctl jobs`: each feed's newest job by default, compact enough for a terminal; `--all` for the store's
history, `--feed` and `--status` to filter; `--json` gives every field, a JSON object per line."""

from __future__ import annotations

from feedctl.state import jobs
from feedctl.state.store import StateStore
from feedctl.units import Hlc
from support import Cli, copy_demo_project, json_lines
from support.jobs import definition

HIGH_WATER = Hlc(1_795_646_958_537_000_000)


def _history(root):
    """orders: a canceled job, then a running one past its high-water mark; rides: a failed job."""
    store = StateStore("sqlite:///target/state.db", root)
    with store.transaction() as conn:
        first = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
        jobs.control(conn, first, "cancel")
        second = jobs.create_job(conn, "orders", "sha256:x", definition("s.t"), "file://x", Hlc(1), {"s.t": (0, 2)})
        conn.execute(
            jobs.jobs.update().where(jobs.jobs.c.job_id == second.job_id).values(high_water_wall=HIGH_WATER.wall)
        )
        failed = jobs.create_job(conn, "rides", "sha256:y", definition("s.r"), "file://y", Hlc(1), {"s.r": (0, 2)})
        jobs.finish(conn, failed.job_id, "failed", error="a data file is gone (vacuumed?)\nmore detail")
    store.close()
    return first.job_id, second.job_id, failed.job_id


def test_each_feeds_newest_job_by_default_and_filters(tmp_path):
    root = copy_demo_project(tmp_path / "demo")
    canceled, running, failed = _history(root)
    cli = Cli(root)

    def ids(*args):
        result = cli("jobs", *args, "--json")
        assert result.exit_code == 0, result.output
        return [r["job_id"] for r in json_lines(result.stdout)]

    assert ids() == [running, failed]
    assert ids("--all") == [canceled, running, failed]
    assert ids("--all", "--feed", "orders") == [canceled, running]
    assert ids("--all", "--status", "canceled", "--status", "failed") == [canceled, failed]
    assert ids("--status", "canceled") == [], "the canceled job is not its feed's newest"
    assert cli("jobs", "--status", "done").exit_code == 2


def test_the_table_is_compact_the_time_readable_and_the_error_one_line(tmp_path):
    root = copy_demo_project(tmp_path / "demo")
    _history(root)
    result = Cli(root)("jobs")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 140, result.output
    assert str(HIGH_WATER) not in result.output and "2026-11-25 22:49:18" in result.output
    assert "a data file is gone (vacuumed?)" in result.output and "more detail" not in result.output
    assert "running: high-water=" not in result.output
    [failed] = json_lines(Cli(root)("jobs", "--status", "failed", "--json").stdout)
    assert failed["running_status"] == "", "a failed job's running status says nothing runs"


def test_selectors_pick_jobs_as_they_pick_feeds_and_a_gone_feeds_name_still_picks_its_jobs(tmp_path):
    """Among a thousand feeds' jobs, `-s` picks those of a tag, a table, a sink or a name, as `run -s` picks
    the feeds; a query feed's table is the one its job reads."""
    root = copy_demo_project(tmp_path / "demo")
    store = StateStore("sqlite:///target/state.db", root)
    made = {}
    with store.transaction() as conn:
        for feed, table in [
            ("movr_all", "movr.users"),
            ("vehicles_in_use", "movr.vehicles"),
            ("ride_ends", "movr.rides"),
            ("orders", "s.t"),  # a feed since removed from the project
        ]:
            made[feed] = jobs.create_job(conn, feed, "sha256:x", definition(table), "file://x", Hlc(1), {table: (0, 1)})
    store.close()
    cli = Cli(root)

    def feeds(*selectors):
        result = cli("jobs", *[a for s in selectors for a in ("-s", s)], "--json")
        assert result.exit_code == 0, result.output
        return sorted(r["feed"] for r in json_lines(result.stdout))

    assert feeds("tag:dispatch") == ["vehicles_in_use"]
    assert feeds("table:movr.vehicles") == ["movr_all", "vehicles_in_use"]
    assert feeds("sink:ride_events", "orders") == ["orders", "ride_ends"]
    assert feeds("tag:movr") == ["movr_all", "ride_ends", "vehicles_in_use"]
    missing = cli("jobs", "-s", "tag:dispatsh")
    assert missing.exit_code == 2 and "matched no feed" in missing.output and "dispatch" in missing.output
