"""Reading a number back from a file or a request: one bounded way, used by every reader.

A number a batch dir or a request holds may come from anyone who can write there: a
401-digit integer (``float()`` of it raises ``OverflowError``), a score of ``1e300`` (its
square is infinite, a sum of two of them too, and a variance then NaN), ``²`` in a URL
(``str.isdigit`` says yes, ``int()`` says no), 5,000 digits (``int()`` refuses past 4,300).
So a number read back is taken here: a JSON value as a float within
±:data:`MAX_MAGNITUDE` (:func:`finite_number`), text as a whole number of at most
:data:`MAX_DIGITS` ASCII digits (:func:`whole_number`); anything else is None, which
each reader treats as it treats a missing value (docs/summary.md, docs/view.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_DIGITS", "MAX_MAGNITUDE", "all_in_range", "finite_number", "whole_number"]

#: The largest magnitude a number read back keeps. Squares and sums of a million such
#: numbers stay finite (1e36), and it is far past any score, duration or count a job has.
MAX_MAGNITUDE = 1e15
#: The most digits a whole number given as text may have (a batch index, a repeat).
MAX_DIGITS = 9


def finite_number(value: Any) -> float | None:
    """``value`` (parsed JSON) as a float: an int or float, not a bool, finite and within
    ±:data:`MAX_MAGNITUDE`; None for anything else."""
    if type(value) is not int and type(value) is not float:
        return None
    # Compared before float(): an int of 401 digits compares exactly, never overflows.
    if not abs(value) <= MAX_MAGNITUDE:  # NaN compares False too
        return None
    return float(value)


def all_in_range(numbers: Iterable[float]) -> bool:
    """Whether :func:`finite_number` keeps every one of ``numbers`` (ints and floats),
    checked in C: a reader of 500,000 rows checks them at once."""
    return all(map(MAX_MAGNITUDE.__ge__, map(abs, numbers)))


def whole_number(text: str, maximum: int = 10**MAX_DIGITS - 1) -> int | None:
    """``text`` as a whole number from 0 to ``maximum``: ASCII digits only (no sign, no
    space, no ``_``, no ``²``), at most :data:`MAX_DIGITS` of them; None otherwise."""
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_DIGITS:
        return None
    number = int(text)
    return number if number <= maximum else None
