"""Durations, sizes and timestamps as users write them in options."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedctl.units import Hlc, StartPoint, parse_duration, parse_size, parse_timestamp

# ---------------------------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("500ms", 0.5),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        ("10s", 10.0),
        ("0s", 0.0),
        ("1.5h", 5400.0),
        ("1h2m3s", 3723.0),
        ("250us", 250e-6),
        ("250µs", 250e-6),
        ("100ns", 100e-9),
        ("1h0m0.5s", 3600.5),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "10", "s", "1d", "-1s", "1m 30s", " 1s", "1s ", "1.s", "1S", "ten seconds", "1w", "1e3s", "1,5s"]
)
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("value", [None, 10, 1.5, True, ["1s"]])
def test_durations_must_be_text(value):
    with pytest.raises(ValueError):
        parse_duration(value)


_UNITS = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@given(st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(list(_UNITS))), min_size=1, max_size=6))
def test_duration_round_trip(parts):
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert parse_duration(text) == pytest.approx(sum(n * _UNITS[unit] for n, unit in parts), rel=1e-9, abs=1e-12)


@given(st.integers(0, 10**6), st.integers(0, 59), st.integers(0, 59))
def test_duration_hours_minutes_seconds(h, m, s):
    assert parse_duration(f"{h}h{m}m{s}s") == h * 3600 + m * 60 + s


# ---------------------------------------------------------------------------------------------- sizes


@pytest.mark.parametrize(
    "value,size",
    [
        ("16MiB", 16 * 2**20),
        ("64MB", 64 * 10**6),
        ("1KiB", 1024),
        ("1KB", 1000),
        ("2GiB", 2 * 2**30),
        ("1TB", 10**12),
        ("1TiB", 2**40),
        ("100B", 100),
        ("1048576", 1048576),
        ("16 MiB", 16 * 2**20),
        ("0.5KiB", 512),
        (1, 1),
        (4096, 4096),
    ],
)
def test_sizes(value, size):
    assert parse_size(value) == size


@pytest.mark.parametrize(
    "value",
    ["", "MiB", "16mib", "16 XB", "-1", "0", "0MiB", "1e6", "sixteen", "16MiB!", 0, -5, True, False, None, "0.1B"],
)
def test_bad_sizes(value):
    with pytest.raises(ValueError):
        parse_size(value)


_SIZE_UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}


@given(st.integers(1, 10**6), st.sampled_from(list(_SIZE_UNITS)))
def test_size_round_trip(n, unit):
    assert parse_size(f"{n}{unit}") == n * _SIZE_UNITS[unit]


@given(st.integers(1, 2**62))
def test_size_integers_and_their_text(n):
    assert parse_size(n) == n
    assert parse_size(str(n)) == n


# ---------------------------------------------------------------------------------------------- timestamps


def nanos(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def test_hlc_timestamp():
    assert parse_timestamp("123.0000000001") == StartPoint(hlc=Hlc(123, 1))
    assert parse_timestamp("1536242855577149065.0000000000") == StartPoint(hlc=Hlc(1536242855577149065, 0))
    assert parse_timestamp("1536242855577149065.0000000042") == StartPoint(hlc=Hlc(1536242855577149065, 42))


def test_hlc_fraction_is_a_decimal_fraction():
    # CockroachDB reads `<wall>.<logical>` as a decimal: `.1` is logical 1000000000, not 1
    assert parse_timestamp("123.1").hlc == Hlc(123, 1_000_000_000)
    assert parse_timestamp("123.5").hlc > parse_timestamp("123.0000000001").hlc


def test_plain_nanoseconds():
    assert parse_timestamp("1700000000000000000") == StartPoint(hlc=Hlc(1700000000000000000, 0))
    assert parse_timestamp(" 42 ").hlc == Hlc(42, 0)


@pytest.mark.parametrize(
    "text,moment",
    [
        ("2024-03-01T12:00:00Z", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),
        ("2024-03-01T12:00:00+00:00", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),
        ("2024-03-01T14:00:00+02:00", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),
        ("2024-03-01T07:30:00-04:30", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),
        ("2024-03-01T12:00:00.250Z", datetime(2024, 3, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc)),
        ("2024-03-01T12:00:00.123456Z", datetime(2024, 3, 1, 12, 0, 0, 123_456, tzinfo=timezone.utc)),
        ("2024-03-01 12:00:00", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),  # no zone: UTC
        ("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=timezone.utc)),
    ],
)
def test_rfc3339(text, moment):
    assert parse_timestamp(text) == StartPoint(hlc=Hlc(nanos(moment), 0))


def test_rfc3339_offsets_are_the_same_instant():
    assert parse_timestamp("2024-03-01T12:00:00Z") == parse_timestamp("2024-03-01T13:00:00+01:00")


def test_version():
    assert parse_timestamp("version:12") == StartPoint(version=12)
    assert parse_timestamp("version:0") == StartPoint(version=0)


def test_version_rejected_where_versions_are_not_allowed():
    with pytest.raises(ValueError):
        parse_timestamp("version:12", allow_version=False)
    assert parse_timestamp("123.0000000000", allow_version=False).hlc == Hlc(123, 0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "version:",
        "version:-1",
        "version:x",
        "12.00000000001",
        "1.2.3",
        "-5",
        "2024-13-01T00:00:00Z",
        "2024-03-01T25:00:00Z",
        "now",
        "12e3",
    ],
)
def test_bad_timestamps(text):
    with pytest.raises(ValueError):
        parse_timestamp(text)


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)))
def test_rfc3339_round_trip(moment):
    text = moment.isoformat().replace("+00:00", "Z")
    assert parse_timestamp(text).hlc == Hlc(nanos(moment), 0)


@given(st.integers(0, 2**63 - 1), st.integers(0, 10**10 - 1))
def test_hlc_round_trip(wall, logical):
    assert parse_timestamp(str(Hlc(wall, logical))).hlc == Hlc(wall, logical)


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)), st.integers(-12 * 60, 14 * 60))
def test_rfc3339_with_offset_round_trip(local, minutes):
    zone = timezone(timedelta(minutes=minutes))
    moment = local.replace(tzinfo=zone)
    assert parse_timestamp(moment.isoformat()).hlc == Hlc(nanos(moment), 0)


# ---------------------------------------------------------------------------------------------- Hlc


def test_hlc_prints_as_cockroachdb():
    assert str(Hlc(1536242855577149065, 0)) == "1536242855577149065.0000000000"
    assert str(Hlc(123, 1)) == "123.0000000001"
    assert str(Hlc(5)) == "5.0000000000"
    assert str(Hlc(1, 9_999_999_999)) == "1.9999999999"


def test_hlc_orders_by_wall_then_logical():
    assert Hlc(1, 5) < Hlc(2, 0) < Hlc(2, 1)
    assert sorted([Hlc(2, 1), Hlc(1, 9), Hlc(2, 0)]) == [Hlc(1, 9), Hlc(2, 0), Hlc(2, 1)]


@given(st.integers(0, 2**63 - 1), st.integers(0, 10**10 - 1))
def test_hlc_text_shape(wall, logical):
    text = str(Hlc(wall, logical))
    whole, fraction = text.split(".")
    assert int(whole) == wall and len(fraction) == 10 and int(fraction) == logical


def test_rfc3339_keeps_nanoseconds():
    base = nanos(datetime(2024, 3, 1, 12, tzinfo=timezone.utc))
    assert parse_timestamp("2024-03-01T12:00:00.123456789Z").hlc == Hlc(base + 123_456_789)
    assert parse_timestamp("2024-03-01T14:00:00.000000001+02:00").hlc == Hlc(base + 1)
    assert parse_timestamp("2024-03-01T12:00:00.5Z").hlc == Hlc(base + 500_000_000)


# ------------------------------------------------------------------------------------- for people


@pytest.mark.parametrize(
    "n,noun,text",
    [
        (0, "message", "0 messages"),
        (1, "message", "1 message"),
        (2, "batch", "2 batches"),
        (1, "batch", "1 batch"),
        (3, "span", "3 spans"),
    ],
)
def test_counts_have_their_plurals(n, noun, text):
    from feedctl.units import plural

    assert plural(n, noun) == text


def test_an_event_timestamp_says_its_utc_time_beside_itself():
    moment = datetime(2026, 11, 25, 2, 40, 1, 999000, tzinfo=timezone.utc)
    wall = int(moment.timestamp()) * 1_000_000_000 + 999_456_789
    assert Hlc(wall, 3).for_people() == f"{wall}.0000000003 (2026-11-25 02:40:01.999 UTC)"
    assert Hlc(0).for_people() == "none"
