"""``--deadline``: parsing clock times, datetimes and durations; which jobs may start."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch.policies.deadline import (
    expected_duration,
    parse_deadline,
    percentile,
    start_refusal,
)

HINT = "write a clock time (07:00), an ISO datetime (2026-12-01T07:00) or a duration (2h30m)"
ZONE = timezone(timedelta(hours=2))
EVENING = datetime(2026, 11, 30, 23, 0, tzinfo=ZONE)


class TestParse:
    def test_clock_time_is_the_next_such_time(self) -> None:
        deadline = parse_deadline("07:00", EVENING)
        assert deadline.at == datetime(2026, 12, 1, 7, 0, tzinfo=ZONE)
        assert deadline.label == "07:00"
        assert deadline.seconds_from(EVENING) == 8 * 3600

    def test_clock_time_later_today(self) -> None:
        morning = datetime(2026, 11, 30, 6, 0, tzinfo=ZONE)
        assert parse_deadline("7:30", morning).at == datetime(2026, 11, 30, 7, 30, tzinfo=ZONE)

    def test_clock_time_now_means_tomorrow(self) -> None:
        assert parse_deadline("23:00", EVENING).at == EVENING + timedelta(days=1)

    def test_duration(self) -> None:
        deadline = parse_deadline("2h30m", EVENING)
        assert deadline.seconds_from(EVENING) == 9000
        assert deadline.label == "01:30"

    def test_a_deadline_with_seconds_shows_them(self) -> None:
        # `--deadline 3s` was shown as "deadline 23:00", as if it had already passed.
        assert parse_deadline("3s", EVENING).label == "23:00:03"
        assert parse_deadline("07:00:30", EVENING).label == "07:00:30"
        later = EVENING + timedelta(seconds=12, microseconds=500)
        assert parse_deadline("1h", later).label == "00:00:12"
        assert parse_deadline("2026-12-03T07:00:05", EVENING).label == "2026-12-03 07:00:05"

    def test_iso_datetime_is_local_unless_it_names_an_offset(self) -> None:
        assert parse_deadline("2026-12-01T07:00", EVENING).at == datetime(
            2026, 12, 1, 7, 0, tzinfo=ZONE
        )
        utc = parse_deadline("2026-12-01T05:00+00:00", EVENING)
        assert utc.seconds_from(EVENING) == 8 * 3600

    def test_far_deadline_shows_its_date(self) -> None:
        assert parse_deadline("2026-12-03T07:00", EVENING).label == "2026-12-03 07:00"

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("", f"empty deadline ({HINT})"),
            ("7", f"deadline '7' needs a unit or a colon ({HINT})"),
            ("25:00", "deadline '25:00' is not a time of day"),
            ("24:00", "deadline '24:00' is not a time of day"),
            ("07:61", "deadline '07:61' is not a time of day"),
            ("07:60", "deadline '07:60' is not a time of day"),
            ("07:00:60", "deadline '07:00:60' is not a time of day"),
            ("tomorrow", f"cannot read deadline 'tomorrow' ({HINT})"),
            ("2026-11-30T22:00", "deadline '2026-11-30T22:00' is not in the future"),
            ("0s", "deadline '0s' is not in the future"),
            ("2026-13-01T07:00", "cannot read deadline '2026-13-01T07:00' as an ISO datetime"),
        ],
    )
    def test_bad_values(self, text: str, message: str) -> None:
        with pytest.raises(ValueError) as caught:
            parse_deadline(text, EVENING)
        assert str(caught.value) == message

    @pytest.mark.parametrize(
        ("text", "time"),
        [
            ("23:59:59", "23:59:59"),
            ("07:59", "07:59:00"),
            ("07:00:59", "07:00:59"),
            ("0:00", "00:00:00"),
        ],
    )
    def test_the_last_value_of_each_field_is_a_time_of_day(self, text: str, time: str) -> None:
        assert parse_deadline(text, EVENING).at.strftime("%H:%M:%S") == time

    @pytest.mark.parametrize(
        ("text", "label"),
        [("23h59m", "22:59"), ("24h", "2026-12-01 23:00"), ("30h", "2026-12-02 05:00")],
    )
    def test_a_deadline_a_day_or_more_away_shows_its_date(self, text: str, label: str) -> None:
        assert parse_deadline(text, EVENING).label == label

    def test_now_must_be_aware(self) -> None:
        with pytest.raises(TypeError) as caught:
            parse_deadline("07:00", datetime(2026, 11, 30, 23, 0))
        assert str(caught.value) == "now must be an aware datetime"


class TestExpected:
    def test_p90_of_the_model_history(self) -> None:
        durations = [float(n) for n in range(1, 11)]
        assert percentile(durations) == 9.0
        assert expected_duration(durations, timeout=None) == 9.0

    def test_capped_by_the_timeout(self) -> None:
        assert expected_duration([100.0, 500.0], timeout=300.0) == 300.0

    def test_the_nearest_rank_is_a_value_observed(self) -> None:
        values = [float(n) for n in range(1, 203)]
        assert percentile(values, 50) == 101.0  # rank 101 of 202
        assert percentile(values, 100) == 202.0
        assert percentile([5.0], 1) == 5.0

    def test_no_history_has_no_percentile(self) -> None:
        with pytest.raises(ValueError) as caught:
            percentile([])
        assert str(caught.value) == "no values"

    def test_timeout_without_history(self) -> None:
        assert expected_duration([], timeout=600.0) == 600.0
        assert expected_duration([], timeout=None) is None


class TestStart:
    deadline = parse_deadline("07:00", EVENING)

    def test_a_job_that_fits_starts(self) -> None:
        assert start_refusal(self.deadline, 60.0, 180.0) is None
        assert start_refusal(self.deadline, 180.0, 180.0) is None  # ends at the deadline

    def test_a_job_that_would_end_after_does_not(self) -> None:
        assert start_refusal(self.deadline, 252.0, 180.0) == (
            "deadline 07:00: expected 4m12s, 3m00s left"
        )

    def test_no_estimate_starts_while_time_is_left(self) -> None:
        assert start_refusal(self.deadline, None, 1.0) is None
        assert start_refusal(self.deadline, None, 0.0) == "deadline 07:00 passed"


@settings(max_examples=100, deadline=None)
@given(
    durations=st.lists(st.floats(0, 1e5), max_size=30),
    timeout=st.one_of(st.none(), st.floats(1, 1e5)),
    left=st.floats(-10, 2e5),
)
def test_a_started_job_is_expected_to_end_before_the_deadline(
    durations: list[float], timeout: float | None, left: float
) -> None:
    deadline = parse_deadline("07:00", EVENING)
    expected = expected_duration(durations, timeout)
    if expected is not None:
        assert expected in durations or expected == timeout
        assert timeout is None or expected <= timeout
    if durations and timeout is None:
        assert expected is not None
        assert sum(d <= expected for d in durations) >= 0.9 * len(durations)
    refusal = start_refusal(deadline, expected, left)
    if refusal is None:
        assert left > 0 and (expected is None or expected <= left)
    else:
        assert refusal.startswith("deadline 07:00")
