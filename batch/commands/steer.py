"""``batch steer BATCH_DIR ACTION``: steer the driver running a batch (docs/view.md).

The request is left in ``batch-logs/control/`` (batch.steering); the command waits until the
driver has taken it and prints what the driver said, from ``events.jsonl``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from batch.errors import ExitStatus, UsageError
from batch.event_segments import mark
from batch.layout import LOGS_DIR
from batch.plan.batch_dir import not_a_batch_dir
from batch.plan.lock import running_driver
from batch.printable import one_line
from batch.steering import (
    ANSWER_POLL,
    ANSWER_TIMEOUT,
    Answer,
    Control,
    ControlError,
    look_for_answer,
    parse_control,
    request_problem,
    write_request,
)
from run_support.numbers import whole_number


def control_from_words(words: Sequence[str], source: str = "batch control") -> Control:
    """``pause``, ``skip MODEL``, ``concurrency [MODEL] N`` as a request."""
    if not words:
        raise ControlError("say what to do: pause, continue, stop, skip MODEL, unskip MODEL, "
                           "concurrency [MODEL] N")  # fmt: skip
    action, rest = words[0], list(words[1:])
    raw: dict[str, Any] = {"action": action, "source": source}
    if action == "concurrency":
        if len(rest) not in (1, 2):
            raise ControlError("concurrency [MODEL] N")
        number = whole_number(rest[-1])
        if number is None:
            raise ControlError(f"concurrency: {rest[-1]!r} is not a whole number")
        raw["number"] = number
        if len(rest) == 2:
            raw["model"] = rest[0]
    elif action in ("skip", "unskip"):
        if len(rest) != 1:
            raise ControlError(f"{action} MODEL")
        raw["model"] = rest[0]
    elif rest:
        raise ControlError(f"{action} takes no argument")
    return parse_control(raw)


def send_control(
    batch_dir: Path,
    control: Control,
    *,
    timeout: float = ANSWER_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Answer, dict[str, Any] | None]:
    """Leave ``control`` for the driver and wait for it to be taken: how it ended (taken,
    refused, timed out: :func:`batch.steering.answer_state`) and the driver's ``control``
    event for it, None when it was not taken within ``timeout``."""
    problem = not_a_batch_dir(batch_dir)
    if problem:
        raise UsageError(problem)
    if running_driver(batch_dir) is None:
        raise UsageError(f"{batch_dir}: no driver is running this batch: nothing to steer")
    start = mark(batch_dir / LOGS_DIR)
    try:
        path = write_request(batch_dir, control)
    except OSError as exc:  # batch-logs/control a symlink, a file, unwritable
        raise UsageError(f"{request_problem(exc)}; the request was not left") from None
    deadline = clock() + timeout
    while True:
        state, said = look_for_answer(
            path, batch_dir / LOGS_DIR, start, control, now=clock(), deadline=deadline
        )
        if state is not Answer.WAITING:
            return state, said
        sleep(ANSWER_POLL)


def control_main(batch_dir: Path, words: Sequence[str], *, out: TextIO) -> ExitStatus:
    """``batch steer``: 0 when the driver took the request, 2 when it or this refused it,
    1 when the driver did not take it in time (it stays queued)."""
    try:
        control = control_from_words(words)
    except ControlError as exc:
        raise UsageError(str(exc)) from None
    state, said = send_control(batch_dir, control)
    if state is Answer.TIMED_OUT or said is None:
        out.write(
            f"the driver has not taken '{control.describe()}' within {ANSWER_TIMEOUT:.0f} s; "
            "it stays queued and is taken when the driver next looks\n"
        )
        return ExitStatus.ERRORS
    message = one_line(str(said.get("message", "")))
    if state is Answer.REFUSED:
        raise UsageError(f"refused by the driver: {message}")
    out.write(f"taken: {message}\n")
    return ExitStatus.OK
