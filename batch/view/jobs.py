"""A job as ``batch view`` keeps it, and reading an event's or a row's fields: what
:mod:`batch.view.state` folds the batch from. Pure.

Every field of a hand-edited row or event that is not what it should be is read as
missing (a 401-digit integer, 1e300, a stamp that is no date), never a crash.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from run_support.numbers import finite_number

#: (case, model, repeat): a job.
Key = tuple[str, str, int]

STATUSES = ("passed", "failed", "error", "skipped", "pending", "running")
FINISHED = frozenset({"passed", "failed", "error"})


#: The status strings kept: one object each, whatever the summary's JSON made.
_STATUS = {status: status for status in STATUSES}


class JobState:
    """One job as the page shows it; slots: a batch of 100,000 holds 100,000 of them."""

    __slots__ = ("attempts", "category", "duration", "reason", "run_dir", "status")

    def __init__(
        self,
        status: str = "pending",
        duration: float | None = None,
        category: str | None = None,
        reason: str | None = None,
        run_dir: str | None = None,
        attempts: int = 0,
    ) -> None:
        self.status = _STATUS.get(status, "pending")
        self.duration = duration
        self.category = None if category is None else sys.intern(category)
        self.reason = reason
        self.run_dir = run_dir
        self.attempts = attempts

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __setitem__(self, name: str, value: Any) -> None:
        if name == "status":
            value = _STATUS.get(value, "error")
        setattr(self, name, value)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def cell(key: Key, job: JobState) -> dict[str, Any]:
    return {
        "case": key[0], "model": key[1], "repeat": key[2], "status": job["status"],
        "category": job["category"], "reason": job["reason"], "duration": job["duration"],
    }  # fmt: skip


def event_key(event: Mapping[str, Any]) -> Key | None:
    case, model, repeat = event.get("case"), event.get("model"), event.get("repeat", 1)
    if not isinstance(case, str) or not isinstance(model, str):
        return None
    return (case, model, repeat if type(repeat) is int and repeat >= 1 else 1)


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def number(value: Any) -> float | None:
    # A 401-digit integer or 1e300 in a hand-edited row or event is no number (not a crash).
    return finite_number(value)


def stamp(event: Mapping[str, Any], default: float) -> float:
    """An event's ``t`` (``2026-12-01T23:51:40.220219Z``) in seconds since the epoch."""
    written = event.get("t")
    if not isinstance(written, str):
        return default
    try:
        return datetime.fromisoformat(written.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def sort_nan(value: float) -> float:
    return -math.inf if math.isnan(value) else value
