"""``batch.view.limits``: a repeated warning is logged once a minute (clock injected)."""

from __future__ import annotations

import logging

from batch.view.limits import OncePerMinute


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, message, None, None)


def test_a_repeated_warning_passes_once_a_minute_and_another_passes_at_once() -> None:
    now = [1000.0]
    once = OncePerMinute(clock=lambda: now[0])
    said = []
    for step in range(130):  # a warning a second for 130 s, and another at 30 s
        now[0] = 1000.0 + step
        said += [m for m in ("Invalid HTTP request received.",) if once.filter(record(m))]
        if step == 30:
            said += [m for m in ("Exceeded concurrency limit.",) if once.filter(record(m))]
    assert said == [
        "Invalid HTTP request received.",
        "Exceeded concurrency limit.",
        "Invalid HTTP request received.",
        "Invalid HTTP request received.",
    ]
