"""The harness side of a warm worker (issue 32): read requests, answer each with one line.

A worker is a program that starts once and serves many jobs: it reads one JSON object per
line on stdin (a request: ``id``, ``case``, ``model``, ``repeat``, ``attempt``, ``run_dir``,
``params``, ``env``) and answers each with one JSON line on stdout (``id``, ``outcome`` and
the other fields a ``result.json`` may hold: ``failure_category``, ``detail``, ``usage``,
``score``, ``reason``)::

    from run_support.worker import answer, requests

    for request in requests():
        answer(request, "passed", score=1.0)

Only the standard library: a harness's own venv may copy this file as it is.

Answers are written to the stdout the worker was started with, kept aside before anything
else runs; ``sys.stdout`` is pointed at stderr, so a harness's own ``print`` never reads as
an answer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["OUTCOMES", "answer", "requests"]

OUTCOMES = frozenset({"passed", "failed", "error"})

_answers: IO[str] | None = None


def requests(
    stream: IO[str] | None = None, answers: IO[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Each request read from ``stream`` (default stdin), until end of input.

    ``answers`` is where :func:`answer` writes; by default the process's own stdout, which
    ``sys.stdout`` then no longer names (it is redirected to stderr). A line that is not a
    JSON object is reported on stderr and skipped: it has no id to answer.
    """
    global _answers
    if answers is None:
        answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
        sys.stdout.flush()
        sys.stdout = sys.stderr
    _answers = answers
    for line in stream if stream is not None else sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as exc:
            print(f"worker: not a request ({exc}): {line[:200]!r}", file=sys.stderr)
            continue
        if not isinstance(request, dict) or "id" not in request:
            print(f"worker: not a request (no id): {line[:200]!r}", file=sys.stderr)
            continue
        yield request


def answer(request: dict[str, Any], outcome: str, **fields: Any) -> None:
    """Answer ``request`` with ``outcome`` (passed, failed, error) and ``fields`` (those of
    a ``result.json``), as one line, flushed at once: the driver waits for it."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r} is not one of {', '.join(sorted(OUTCOMES))}")
    if _answers is None:
        raise RuntimeError("answer() before requests(): nowhere to write answers")
    line = json.dumps({**fields, "id": request["id"], "outcome": outcome}, ensure_ascii=False)
    _answers.write(line + "\n")
    _answers.flush()
