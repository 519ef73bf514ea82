"""Durations as people write them in a sweep file (``90s``, ``5m``, ``1h30m``) and show them.

``parse_duration`` turns a sweep file value into seconds. Two labels show seconds back:
``format_duration`` (``2h03m``: short, for reports) and ``format_duration_hms``
(``2h03m04s``, ``?`` when unknown: to the second, for the progress display, where a running
job's time visibly ticks). All are pure.
"""

from __future__ import annotations

import math
import re

#: Seconds per unit, largest first: a compound duration must use them in this order.
UNITS: dict[str, float] = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(rf"{_NUMBER}")
_PART = re.compile(rf"\s*({_NUMBER})\s*([A-Za-z]+)")
_HINT = "write e.g. 90s, 5m, 2h, 1h30m, 250ms or plain seconds"
#: The longest duration anything takes: ten years. Past it a value is a typo or an attack
#: (``999999999h``), and it would overflow the datetimes and timers it is added to.
MAX_SECONDS = 10 * 365 * 24 * 3600.0


class DurationTooLong(ValueError):
    """A duration past :data:`MAX_SECONDS`: readable, but no timer can hold it."""


def parse_duration(value: object) -> float:
    """Seconds for ``value``: a number of seconds or a string like ``90s``, ``1h30m``, ``30``.

    Raises ``ValueError`` with a message fit to show a user (negative, empty, unknown unit,
    units repeated or out of order, not a number).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a duration ({_HINT}), got {type(value).__name__}")
    if isinstance(value, int | float):
        try:
            return _checked(float(value), repr(value))
        except OverflowError:
            raise DurationTooLong(_too_long(repr(value))) from None
    text = value.strip()
    if not text:
        raise ValueError(f"empty duration ({_HINT})")
    if text.startswith("-"):
        raise ValueError(f"duration {value!r} is negative")
    if _PLAIN.fullmatch(text):
        return _checked(float(text), repr(value))
    return _checked(_parse_compound(text, value), repr(value))


def _parse_compound(text: str, original: str) -> float:
    total, pos, previous_rank = 0.0, 0, -1
    ranks = list(UNITS)
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise ValueError(f"cannot read {original!r} as a duration ({_HINT})")
        number, unit = match.groups()
        if unit not in UNITS:
            raise ValueError(f"unknown unit {unit!r} in {original!r} (units: ms, s, m, h; {_HINT})")
        rank = ranks.index(unit)
        # "5m1h" or "1m1m" is almost always a typo, not an intended sum.
        if rank <= previous_rank:
            raise ValueError(f"units in {original!r} must go from largest to smallest, once each")
        total += float(number) * UNITS[unit]
        pos, previous_rank = match.end(), rank
    return total


def _checked(seconds: float, shown: str) -> float:
    if math.isnan(seconds):
        raise ValueError(f"duration {shown} is not a finite number of seconds")
    if seconds < 0:
        raise ValueError(f"duration {shown} is negative")
    if seconds > MAX_SECONDS:  # infinity too: no timer holds it either
        raise DurationTooLong(_too_long(shown))
    return seconds


def _too_long(shown: str) -> str:
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"duration {shown} is too long (at most {MAX_SECONDS / 3600:.0f}h, ten years)"


def format_duration(seconds: float) -> str:
    """A short label: ``0.4s`` under 10 s, ``42s``, ``1m02s`` under an hour, else ``2h03m``."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if round(seconds, 1) < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        minutes, secs = divmod(whole, 60)
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours}h{minutes:02d}m"


def format_duration_hms(seconds: float | None) -> str:
    """``0.4s`` under 10 s, ``42s``, ``1m02s``, ``2h03m04s``; ``?`` when unknown.

    A negative value shows as ``0.0s``.
    """
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
