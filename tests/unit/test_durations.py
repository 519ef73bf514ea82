"""Durations as written in a sweep file, and as shown to a user."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batch.durations import MAX_SECONDS, format_duration, parse_duration
from batch.sweep.sizes import MAX_SIZE, parse_size


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        (90, 90.0),
        (2.5, 2.5),
        (0, 0.0),
        ("30", 30.0),
        ("1.5", 1.5),
        ("90s", 90.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("1m30s", 90.0),
        ("1h0m5s", 3605.0),
        ("1.5h", 5400.0),
        (" 10s ", 10.0),
    ],
)
def test_parse_duration_accepts_the_documented_forms(written: object, seconds: float) -> None:
    assert parse_duration(written) == seconds


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("", "empty duration"),
        ("   ", "empty duration"),
        ("-5s", "negative"),
        (-1, "negative"),
        ("30x", "unknown unit 'x'"),
        ("5M", "unknown unit 'M'"),
        ("5 minutes", "unknown unit 'minutes'"),
        ("1h30", "cannot read '1h30'"),
        ("abc", "cannot read 'abc'"),
        ("30m1h", "largest to smallest"),
        ("1m1m", "largest to smallest"),
        (float("nan"), "not a finite number"),
        (float("inf"), "too long"),
        ("999999999h", "too long (at most 87600h"),
        ("9" * 400, "too long"),
        (10**400, "too long"),
        ("87601h", "too long"),
        (True, "got bool"),
        (None, "got NoneType"),
        ([5], "got list"),
    ],
)
def test_parse_duration_rejects_with_a_clear_message(written: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_duration(written)


@given(hours=st.integers(0, 100), minutes=st.integers(0, 59), seconds=st.integers(0, 59))
def test_compound_durations_add_up(hours: int, minutes: int, seconds: int) -> None:
    assert parse_duration(f"{hours}h{minutes}m{seconds}s") == hours * 3600 + minutes * 60 + seconds


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0.0s"),
        (0.4, "0.4s"),
        (9.94, "9.9s"),
        (9.96, "10s"),
        (42.4, "42s"),
        (59.6, "1m00s"),
        (62, "1m02s"),
        (3599.4, "59m59s"),
        (3599.6, "1h00m"),
        (7380, "2h03m"),
        (100 * 3600, "100h00m"),
        (-62, "-1m02s"),
    ],
)
def test_format_duration_is_short_and_rounds_up_into_the_next_unit(
    seconds: float, shown: str
) -> None:
    assert format_duration(seconds) == shown


@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(alphabet="0123456789.hms e+-", max_size=40),
        st.from_regex(r"[0-9]{1,400}(h|m|s|ms)?", fullmatch=True),
    )
)
def test_any_duration_is_seconds_within_the_bound_or_a_value_error(value: object) -> None:
    """Hostile values (400 digits, 1e308, infinity) are a message, never an OverflowError."""
    try:
        seconds = parse_duration(value)
    except ValueError:
        return
    assert 0 <= seconds <= MAX_SECONDS


@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.from_regex(r"[0-9]{1,400}(\.[0-9]*)?(b|kb|GiB|TiB|T)?", fullmatch=True),
    )
)
def test_any_size_is_bytes_within_the_bound_or_a_value_error(value: object) -> None:
    try:
        size = parse_size(value)
    except ValueError:
        return
    assert 0 <= size <= MAX_SIZE
