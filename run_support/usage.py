"""What a run spent: tokens, requests and cost, as a job reports them in ``result.json``.

A job reports usage as an object under ``usage`` in ``result.json`` (``write_result(...,
usage={...})``); each step of a multi-step job may report its own. Every field is optional:
a field the job did not report is ``None``, never 0, so "reported nothing" stays apart from
"spent nothing" through every sum (``None + None`` is ``None``, ``None + 3`` is ``3``).

Reading is tolerant and never raises (:func:`parse_usage`): a field that is negative, NaN,
infinite, not a number or a boolean is left out and named in a one-line problem the runner
can record; the job's outcome never depends on its usage. Keys this version does not know
(``cache_read_tokens``, ``provider``, ...) are not summed or budgeted; they are returned
aside (``ParsedUsage.other``) so that a writer may keep them, and :meth:`Usage.to_json`
never writes them. A whole number written as a float is taken back as the integer it denotes.

Every number is bounded (:data:`MAX_COUNT`, :data:`MAX_COST_USD` for what one run reports;
:data:`TOTAL_FACTOR` times as much for a total read back): past the bound no real bill is
described, and a sum of such numbers is what crashed the writers (an integer too long for
``str``) and the readers (a float sum that overflows). A value past it is left out with a
problem, as one that is negative, so every sum of usages stays a finite number that JSON
and every reader can hold.

Readers of ``run-meta.json`` and ``batch-summary.json`` that predate this module see the
``usage`` object as one more unknown key (both formats promise readers ignore those), so the
key is additive and both schemas stay 1. Format: ``docs/usage.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from run_support import jsonio

#: The fields of a usage object, in the order :meth:`Usage.to_json` writes them.
INT_FIELDS = ("input_tokens", "output_tokens", "requests")
FIELDS = (*INT_FIELDS, "cost_usd")

#: The most one run may report of a count (tokens, requests): a quadrillion, beyond any
#: real run and exact in a 64-bit float, so every JSON reader reads it as written.
MAX_COUNT = 10**15
#: The most one run may report of a cost, in US dollars.
MAX_COST_USD = 10**9
#: A total read back from a record or a summary row sums a job's attempts: it may be this
#: many times the bounds above (a thousand attempts at the bound).
TOTAL_FACTOR = 1000

# Written cost is rounded to a millionth of a cent: summing 0.1 + 0.2 dollars must not
# write 0.30000000000000004, and no price list is finer than this.
_COST_DIGITS = 8


@attrs.frozen
class Usage:
    """What one attempt, step or job spent; each field ``None`` when nobody reported it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int | None = None
    cost_usd: float | None = None

    @property
    def reported(self) -> bool:
        """Whether any field was reported (a reported 0 counts)."""
        return any(getattr(self, name) is not None for name in FIELDS)

    @property
    def tokens(self) -> int | None:
        """Input plus output tokens; None when neither was reported."""
        return _add(self.input_tokens, self.output_tokens)

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(*(_add(getattr(self, n), getattr(other, n)) for n in FIELDS))

    def to_json(self) -> dict[str, int | float]:
        """The reported fields only, in :data:`FIELDS` order; ``{}`` when none was."""
        out: dict[str, int | float] = {}
        for name in INT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, _COST_DIGITS)
        return out


#: Nothing reported: the identity of ``+``.
NO_USAGE = Usage()


_N = TypeVar("_N", int, float)


def _add(a: _N | None, b: _N | None) -> _N | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def total(usages: Iterable[Usage | None]) -> Usage:
    """The field-wise sum of ``usages``; ``None`` entries and unreported fields add nothing.

    Costs are summed with ``math.fsum``, so the total of many small costs does not drift.
    """
    ints: dict[str, int | None] = dict.fromkeys(INT_FIELDS)
    costs: list[float] = []
    for usage in usages:
        if usage is None:
            continue
        for name in INT_FIELDS:
            ints[name] = _add(ints[name], getattr(usage, name))
        if usage.cost_usd is not None:
            costs.append(usage.cost_usd)
    return Usage(**ints, cost_usd=math.fsum(costs) if costs else None)


@attrs.frozen
class ParsedUsage:
    """What :func:`parse_usage` made of a ``usage`` value."""

    usage: Usage
    #: One line per value left out ("usage.cost_usd is NaN, not a number of at least 0").
    problems: tuple[str, ...] = ()
    #: Keys this version does not know, as the job wrote them.
    other: dict[str, Any] = attrs.field(factory=dict)

    @property
    def problem(self) -> str | None:
        """All problems as one line for a record's detail; None when there were none."""
        return "; ".join(self.problems) or None


#: What a run that reported no usage made of it.
NOTHING_REPORTED = ParsedUsage(NO_USAGE)


def parse_usage(raw: Any, where: str = "usage", *, totals: bool = False) -> ParsedUsage:
    """Read a ``usage`` value from ``result.json``, a record or a summary row; never raises.

    ``None`` (absent or ``null``) is nothing reported. Each known field must be a number of
    at least 0 (the three counts whole numbers) within its bound (:data:`MAX_COUNT`,
    :data:`MAX_COST_USD`; :data:`TOTAL_FACTOR` times that for ``totals``, a sum read back);
    one that is not is left out and named in ``problems``, and the fields that are valid
    are kept, so a job whose ``cost_usd`` is ``"n/a"`` still counts its tokens. ``where``
    prefixes each problem (``usage``, ``steps[1].usage``).
    """
    if raw is None:
        return ParsedUsage(NO_USAGE)
    if not isinstance(raw, Mapping):
        return ParsedUsage(NO_USAGE, (f"{where} is {_kind(raw)}, not an object",))
    factor = TOTAL_FACTOR if totals else 1
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name in FIELDS:
        value = raw.get(name)
        if value is None:
            continue
        number: int | float | None
        if name in INT_FIELDS:
            number, problem = _count(value, MAX_COUNT * factor)
        else:
            number, problem = _cost(value, MAX_COST_USD * factor)
        if problem is None:
            values[name] = number
        else:
            problems.append(f"{where}.{name} is {_shown(value)}, not {problem}")
    other = {key: value for key, value in raw.items() if key not in FIELDS}
    return ParsedUsage(Usage(**values), tuple(problems), other)


def _count(value: Any, most: int) -> tuple[int | None, str | None]:
    wanted = "a whole number of at least 0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, wanted
    if isinstance(value, float):
        # A whole float is what orjson makes of an integer past 64 bits, and what some
        # languages write for any number: take it back as the integer it denotes.
        if not value.is_integer():
            return None, wanted
        value = int(value)
    if value < 0:
        return None, wanted
    return (value, None) if value <= most else (None, f"a count of at most {_power(most)}")


def _cost(value: Any, most: float) -> tuple[float | None, str | None]:
    wanted = "a number of at least 0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, wanted
    if isinstance(value, int) and value > most:  # before float(): it may not fit one
        return None, f"a cost of at most {_power(most)} dollars"
    number = float(value)
    if not math.isfinite(number) or number < 0:
        return None, wanted
    return (number, None) if number <= most else (None, f"a cost of at most {_power(most)} dollars")


def _power(bound: float) -> str:
    """A bound, a power of ten, as ``10^15``."""
    return f"10^{round(math.log10(bound))}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", list: "a list", int: "an integer", float: "a number"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        # Quoting it whole would swamp the line (or fail: str() refuses 4,300 digits).
        return f"{'a negative' if value < 0 else 'an'} integer past 64 bits"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 2**64:
        return f"{value:.3e}"  # not its hundreds of digits
    if isinstance(value, bool | int | float):
        return repr(value)
    return _kind(value)


def usage_in_result(data: bytes | OSError | None) -> ParsedUsage:
    """The usage a ``result.json`` reports, from the bytes the runner read; never raises.

    Separate from classifying the outcome so that a run whose outcome the file does not
    decide (a timeout) still has its spend counted. A file that is missing, unreadable, not
    JSON or not an object reports nothing here: the outcome's classification says why.
    """
    if data is None or isinstance(data, OSError):
        return ParsedUsage(NO_USAGE)
    try:
        raw = jsonio.loads(data)
    except ValueError:
        return ParsedUsage(NO_USAGE)
    return parse_usage(raw.get("usage")) if isinstance(raw, dict) else ParsedUsage(NO_USAGE)


def previous_total(record_total: Any, record_usage: Any) -> Usage:
    """What a job had spent before its next attempt, from its newest record's keys.

    ``usage_total`` when the record has one; otherwise its ``usage`` (a record written
    before totals were kept was the job's only attempt that reported anything).
    """
    return usage_of(record_total if record_total is not None else record_usage)


def usage_of(raw: Any) -> Usage:
    """The valid fields of a ``usage`` value read back from a record or a summary row.

    For readers: what a writer checked is read back as is, and a hand-edited value that is
    not valid, or past the bound of a total, counts as not reported rather than stopping
    the reader.
    """
    return parse_usage(raw, totals=True).usage


__all__ = [
    "FIELDS",
    "MAX_COST_USD",
    "MAX_COUNT",
    "NOTHING_REPORTED",
    "NO_USAGE",
    "ParsedUsage",
    "Usage",
    "parse_usage",
    "previous_total",
    "total",
    "usage_in_result",
    "usage_of",
]


#: The JSON Schema of a usage object (a record's ``usage``, a summary row's): declared once,
#: for ``run_support.schema`` and ``batch.summary.schema``.
USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What was spent, as jobs report it (docs/usage.md): any subset of the four "
    "fields; a field nobody reported is absent, never 0.",
    "properties": {
        "input_tokens": {"type": "integer", "minimum": 0},
        "output_tokens": {"type": "integer", "minimum": 0},
        "requests": {"type": "integer", "minimum": 0},
        "cost_usd": {
            "type": "number",
            "minimum": 0,
            "description": "US dollars, rounded to 8 decimal places.",
        },
    },
    "additionalProperties": False,
}
