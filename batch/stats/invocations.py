"""Every invocation of a batch, from ``batch-logs/events.jsonl``: when the batch started and
how long it has run in all.

``batch-summary.json`` holds ``started_at`` and ``elapsed_seconds`` of its last invocation
only (docs/summary.md); a batch resumed twice ran three times. Each invocation writes a
``batch_start`` event and, unless the driver was killed outright, a ``batch_end`` one
(docs/cli.md); a killed driver's invocation ends at its last event. Pure: the caller reads
the lines (``batch.stats.source.read_invocations``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs


@attrs.frozen
class Invocation:
    started: datetime
    ended: datetime
    #: ``batch_end``'s state; ``None`` when the driver left none (killed, or still running).
    state: str | None

    @property
    def seconds(self) -> float:
        return max(0.0, (self.ended - self.started).total_seconds())


@attrs.frozen
class BatchSpan:
    """The whole batch: first start, the time all invocations ran, how many there were."""

    started_at: str | None
    elapsed_seconds: float | None
    invocations: int


def parse_stamp(text: Any) -> datetime | None:
    """An events/ledger timestamp (ISO 8601 with ``Z``), ``None`` when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def invocations(lines: Iterable[str | bytes]) -> list[Invocation]:
    """The invocations the event lines record, in order. Lines that are not JSON objects
    with a timestamp (a torn last line after a power cut) are passed over."""
    found: list[Invocation] = []
    started: datetime | None = None
    last: datetime | None = None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        moment = parse_stamp(event.get("t")) if isinstance(event, dict) else None
        if moment is None:
            continue
        kind = event.get("event")
        if kind == "batch_start":
            if started is not None:  # the previous driver died without a batch_end
                found.append(Invocation(started, last or started, None))
            started = moment
        elif kind == "batch_end" and started is not None:
            state = event.get("state")
            found.append(Invocation(started, moment, state if isinstance(state, str) else None))
            started = None
        last = moment
    if started is not None:
        found.append(Invocation(started, last or started, None))
    return found


def batch_span(runs: Sequence[Invocation], summary: Mapping[str, Any]) -> BatchSpan:
    """The batch's first start and total run time over ``runs``; the summary's own
    (its last invocation's) when no event says more.

    The last invocation of a driver that is still running has written no ``batch_end``:
    its end is the later of its last event and the summary's ``elapsed_seconds``.
    """
    started, elapsed = summary.get("started_at"), summary.get("elapsed_seconds")
    if not runs:
        return BatchSpan(started, elapsed, 1 if started else 0)
    seconds = [run.seconds for run in runs]
    # The summary is always the last invocation's, so its elapsed time is that one's.
    if runs[-1].state is None and isinstance(elapsed, int | float):
        seconds[-1] = max(seconds[-1], float(elapsed))
    first = runs[0].started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return BatchSpan(first, round(sum(seconds), 3), len(runs))
