"""``--deadline``: start no job that would still run at a given time.

:func:`parse_deadline` reads a clock time (``07:00``: the next 07:00, local time), an ISO
datetime (``2026-12-01T07:00``, local unless it names an offset) or a duration from now
(``2h30m``). A job's expected duration is a high percentile (p90) of its model's recorded
durations, or its timeout while the model has none; :func:`start_refusal` says why a job
that would end after the deadline does not start (``deadline 07:00: expected 4m12s, 3m00s
left``). docs/policies.md, "Deadline".

Pure: ``now`` is always passed in. The driver turns the deadline into seconds on its own
monotonic clock once, at parse time (:meth:`Deadline.seconds_from`), so a wall-clock jump
during the night cannot move it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, time, timedelta

import attrs

from batch.durations import DurationTooLong, format_duration_hms, parse_duration

#: Which recorded duration a job is expected to take: most jobs take no longer.
PERCENTILE = 90

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_HINT = "write a clock time (07:00), an ISO datetime (2026-12-01T07:00) or a duration (2h30m)"


@attrs.frozen
class Deadline:
    at: datetime
    #: How messages name it: ``07:00``, or with the date when it is a day or more away.
    label: str

    def seconds_from(self, now: datetime) -> float:
        return (self.at - now).total_seconds()


def parse_deadline(text: str, now: datetime) -> Deadline:
    """The deadline ``text`` names, seen at ``now`` (an aware local datetime).

    ``ValueError`` with a one-line message for anything unreadable or not in the future.
    """
    if now.tzinfo is None:
        raise TypeError("now must be an aware datetime")
    value = text.strip()
    if not value:
        raise ValueError(f"empty deadline ({_HINT})")
    at = _clock_time(value, now) or _iso_datetime(value, now) or _duration(value, now)
    if at is None:
        raise ValueError(f"cannot read deadline {text!r} ({_HINT})")
    if at <= now:
        raise ValueError(f"deadline {text!r} is not in the future")
    # Its seconds shown when it has some: a `3s` deadline is not "18:54".
    shown = "%H:%M:%S" if at.second or at.microsecond else "%H:%M"
    if at - now >= timedelta(days=1):
        shown = "%Y-%m-%d " + shown
    return Deadline(at=at, label=at.strftime(shown))


def _clock_time(value: str, now: datetime) -> datetime | None:
    match = _CLOCK.fullmatch(value)
    if match is None:
        return None
    hour, minute, second = (int(part or 0) for part in match.groups())
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"deadline {value!r} is not a time of day")
    at = datetime.combine(now.date(), time(hour, minute, second), tzinfo=now.tzinfo)
    # The next such time: 07:00 said at 23:00 means tomorrow morning.
    return at if at > now else at + timedelta(days=1)


def _iso_datetime(value: str, now: datetime) -> datetime | None:
    if not re.match(r"\d{4}-\d{2}-\d{2}", value):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"cannot read deadline {value!r} as an ISO datetime") from None
    return at.replace(tzinfo=now.tzinfo) if at.tzinfo is None else at


def _duration(value: str, now: datetime) -> datetime | None:
    if re.fullmatch(r"[\d.]+", value):
        # "7" is as likely 07:00 as seven seconds; make the user say which.
        raise ValueError(f"deadline {value!r} needs a unit or a colon ({_HINT})")
    try:
        seconds = parse_duration(value)
    except DurationTooLong as exc:
        raise ValueError(str(exc)) from None
    except ValueError:
        return None
    return now + timedelta(seconds=seconds)


def percentile(values: Sequence[float], percent: float = PERCENTILE) -> float:
    """The nearest-rank percentile: a value that was actually observed."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def expected_duration(durations: Sequence[float], timeout: float | None) -> float | None:
    """How long a job is expected to take: p90 of its model's recorded durations (finished
    jobs, carried ones included), capped by its timeout; the timeout with no history; None
    when there is neither."""
    if not durations:
        return timeout
    typical = percentile(durations)
    return typical if timeout is None else min(typical, timeout)


def start_refusal(deadline: Deadline, expected: float | None, left: float) -> str | None:
    """None when a job expected to take ``expected`` seconds fits in the ``left`` seconds
    before the deadline; else the reason it does not start.

    A job with no estimate at all starts while any time is left: it has no history to go
    by, and the deadline itself stops it.
    """
    if left <= 0:
        return f"deadline {deadline.label} passed"
    if expected is None or expected <= left:
        return None
    return (
        f"deadline {deadline.label}: expected {format_duration_hms(expected)}, "
        f"{format_duration_hms(left)} left"
    )
