"""Invocations from ``events.jsonl`` (batch/stats/invocations.py): the whole batch's start
and run time."""

from __future__ import annotations

import json

from batch.stats.invocations import batch_span, invocations


def line(event: str, t: str, **fields: object) -> str:
    return json.dumps({"t": t, "event": event, **fields})


def test_a_still_running_last_invocation_runs_at_least_as_long_as_its_summary_says() -> None:
    runs = invocations(
        [
            line("batch_start", "2026-11-30T03:00:00.000000Z"),
            line("batch_end", "2026-11-30T03:10:00.000000Z", state="interrupted"),
            line("batch_start", "2026-11-30T04:00:00.000000Z"),
            line("start", "2026-11-30T04:00:01.000000Z"),
        ]
    )
    assert [run.state for run in runs] == ["interrupted", None]
    span = batch_span(runs, {"started_at": "2026-11-30T04:00:00Z", "elapsed_seconds": 300.0})
    assert (span.started_at, span.elapsed_seconds, span.invocations) == (
        "2026-11-30T03:00:00.000000Z",
        900.0,
        2,
    )


def test_lines_that_are_not_events_are_passed_over() -> None:
    runs = invocations(
        [
            "not json",
            "[1, 2]",
            line("batch_start", "yesterday"),
            line("batch_start", "2026-11-30T03:00:00.000000Z"),
            line("batch_end", "2026-11-30T03:00:30.000000Z", state="complete"),
            b'{"t": "2026-11-30T03:01',
        ]
    )
    assert [(run.seconds, run.state) for run in runs] == [(30.0, "complete")]


def test_no_events_the_summary_is_the_span() -> None:
    span = batch_span([], {"started_at": "2026-11-30T03:00:00Z", "elapsed_seconds": 12.5})
    assert (span.started_at, span.elapsed_seconds, span.invocations) == (
        "2026-11-30T03:00:00Z",
        12.5,
        1,
    )
