"""A table's retention properties as Delta reads them, and a job's headroom on them."""

from __future__ import annotations

import pytest

from feedctl.source.retention import DEFAULTS, FILES, LOG, Retention, RetentionError, interval_seconds

DAY = 86_400.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("interval 1 week", 7 * DAY),
        ("interval 30 days", 30 * DAY),
        ("7 days", 7 * DAY),
        ("INTERVAL 168 HOURS", 7 * DAY),
        ("interval 1 day 12 hours", 1.5 * DAY),
        ("interval 0 seconds", 0.0),
    ],
)
def test_a_retention_reads_as_delta_reads_it(text, seconds):
    assert interval_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "interval", "1 fortnight", "interval 1 month", "seven days", "7 days later"])
def test_what_is_not_an_interval_is_an_error(text):
    with pytest.raises(RetentionError, match="not an interval"):
        interval_seconds(text)


def test_a_jobs_headroom_is_the_shorter_retention_less_the_age_of_the_oldest_version_it_needs():
    assert Retention.of({}) == Retention(DEFAULTS[FILES], DEFAULTS[LOG]) == Retention(7 * DAY, 30 * DAY)
    retention = Retention.of({FILES: "interval 2 days", LOG: "interval 1 day"})
    now = 10 * 86_400 * 10**9
    assert retention.headroom(now - 6 * 3600 * 10**9, now) == DAY - 6 * 3600
    assert retention.headroom(now - 2 * 86_400 * 10**9, now) == -DAY  # may be gone already
    assert retention.headroom(None, now) == DAY  # nothing committed it still needs
    assert retention.keeping(now - 2 * 86_400 * 10**9, now) == "RETAIN 72 HOURS"  # 48 h and a day's margin
    with pytest.raises(RetentionError, match=f"{FILES}: 'a week' is not an interval"):
        Retention.of({FILES: "a week"})


def test_a_headroom_under_a_quarter_of_the_retention_is_low():
    from feedctl.job.headroom import Headroom

    retention = Retention(4 * 3600.0, 10 * 3600.0)
    assert Headroom("s.t", 3, 0, retention, 3599.0).low
    assert not Headroom("s.t", 3, 0, retention, 3601.0).low
    assert Headroom("s.t", 3, 0, retention, -5.0).to_json()["low"] is True
