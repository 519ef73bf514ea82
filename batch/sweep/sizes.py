"""Sizes in a sweep file (``memfree: 4GiB``): parsing, checking and showing them."""

from __future__ import annotations

import re
from typing import Any

from batch.sweep.nodes import Node, checked

SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*")
_HINT = "write e.g. 4GiB, 512MiB, 8GB or a number of bytes"
#: The largest size: 1 PiB, more memory than any machine a sweep runs on has. Past it a
#: value is a typo or an attack, and it would overflow the arithmetic that uses it.
MAX_SIZE = 2**50


#: Seconds between two looks at available memory while the gate is closed.
def parse_size(value: object) -> int:
    """Bytes for ``value``: an integer number of bytes or a string like ``4GiB``, ``512MB``.

    Raises ``ValueError`` with a message fit to show a user.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a size ({_HINT}), got {type(value).__name__}")
    if isinstance(value, int | float):
        # An integer past a float's range is larger than any size anyway.
        number, unit = float(min(value, 2 * MAX_SIZE)), "b"
    else:
        match = _SIZE.fullmatch(value)
        if match is None:
            raise ValueError(f"cannot read {value!r} as a size ({_HINT})")
        number, unit = float(match.group(1)), (match.group(2) or "b").lower()
        if unit not in SIZE_UNITS:
            raise ValueError(f"unknown unit {match.group(2)!r} in {value!r} ({_HINT})")
    if number != number:
        raise ValueError(f"size {value!r} is not a number")
    if number < 0:
        raise ValueError(f"size {value!r} is negative")
    if not number * SIZE_UNITS[unit] <= MAX_SIZE:  # NaN and infinity too
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ValueError(f"size {shown} is too large (at most 1 PiB)")
    return int(number * SIZE_UNITS[unit])


def format_size(n_bytes: float) -> str:
    """``3.2 GiB``, ``512 MiB``, ``900 KiB``: binary units, as RAM is usually shown."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n_bytes) >= size:
            value = n_bytes / size
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{n_bytes:.0f} B"


def memfree_key(node: Node) -> int | None:
    """The sweep's ``memfree`` key: a size, or null for no gate."""
    return None if node.value is None else checked(node, parse_size)


#: ``memfree`` and the like: a size's schema.
SCHEMA_DEFS: dict[str, Any] = {
    "size": {
        "description": "Bytes, or a number with a unit: 4GiB, 512MB, 900KiB.",
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {
                "type": "string",
                "pattern": "^\\s*(\\d+(\\.\\d*)?|\\.\\d+)\\s*[A-Za-z]*\\s*$",
            },
        ],
    },
}
