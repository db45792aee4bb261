"""What `verify --all-jobs` finds across a feed's jobs that no job alone shows: a gap between two jobs, and a
job's files written below a RESOLVED file an earlier job had left in the folder."""

from __future__ import annotations

from feedctl.sinks.naming import ts33
from feedctl.state.jobs import Job
from feedctl.units import Hlc
from feedctl.verify.across_jobs import below_resolved, gaps
from support.jobs import definition, stored_job

S = 1_800_000_000_000_000_000  # some wall time, in nanoseconds


def _job(
    job_id: int, start: int, high_water: int, scan: str = "no", scanned: bool = False, sink: str = "file://out"
) -> Job:
    return stored_job(
        job_id,
        "canceled",
        definition=definition("s.t", initial_scan=scan),
        sink_uri=sink,
        start=Hlc(S + start),
        high_water=Hlc(S + high_water) if high_water else Hlc(0),
        initial_scan_done=scanned,
    )


def _data(job_id: int, at: int) -> str:
    return f"{ts33(Hlc(S + at))}-{job_id:016x}-1-0-00000000-t-1.ndjson"


def _resolved(at: int) -> str:
    return f"{ts33(Hlc(S + at))}.RESOLVED"


def test_a_job_continuing_from_the_high_water_mark_leaves_no_gap():
    assert gaps([_job(1, 0, 100), _job(2, 100, 200), _job(3, 50, 250)]) == []


def test_a_job_starting_past_the_previous_high_water_mark_without_a_scan_leaves_a_gap():
    [gap] = gaps([_job(1, 0, 100), _job(2, 150, 200)])
    assert gap.startswith(f"job 2 started at {Hlc(S + 150)}, after job 1's high-water mark {Hlc(S + 100)}")
    assert gaps([_job(1, 0, 100), _job(2, 150, 200, scan="yes", scanned=True)]) == []  # scanned: covered
    assert gaps([_job(1, 0, 100), _job(2, 150, 200, sink="file://elsewhere")]) == []  # another consumer
    assert len(gaps([_job(1, 0, 0), _job(2, 150, 200)])) == 1  # a job that never moved reached its start


def test_files_of_a_later_job_below_an_earlier_jobs_resolved_file():
    # the slip: job 2 rescanned at 300 and resolved 400; job 3 started at job 1's mark, 100, below it
    every = [_job(1, 0, 100), _job(2, 300, 400, scan="yes", scanned=True), _job(3, 100, 500)]
    names = sorted(
        [_data(1, 50), _resolved(100), _data(2, 300), _resolved(400), _data(3, 150), _data(3, 450), _resolved(500)]
    )
    [found] = below_resolved(every, names)
    assert found.startswith(f"{_data(3, 150)}: job 3 wrote it at or below {_resolved(400)}")


def test_a_job_continuing_from_the_resolved_timestamp_is_not_below_it():
    every = [_job(1, 0, 100), _job(2, 100, 200)]
    names = sorted([_data(1, 50), _resolved(100), _data(2, 101), _resolved(200)])
    assert below_resolved(every, names) == []
