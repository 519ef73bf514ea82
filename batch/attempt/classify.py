"""What one finished attempt's outcome was, from how it stopped and what it left behind.

A pure function over plain data (the rules: docs/ledger.md, "How the driver classifies a
run"): the runner gathers the facts — timeout, exit status, the bytes of ``result.json``, a
way to read the tail of ``output.log`` — and :func:`classify` applies the rules in order.
The first rule that applies wins:

1. the driver's timeout killed it → ``error`` / ``infra_failure``, ``stop_reason: timeout``;
2. the job wrote ``result.json`` → its ``outcome`` and ``failure_category``, its other keys
   as ``result``; an invalid one → ``error`` / ``infra_failure`` and the reason in
   ``result["classification_error"]``;
3. exit 0 → ``passed``, 1 → ``failed`` / ``model_failure``, anything else or a signal →
   ``error`` / ``infra_failure``;
4. only when rule 3 gave a failure: the first configured log pattern category found in the
   log's tail (case-insensitive; a number at either end of a pattern only as a whole
   number, see :func:`pattern_regex`) replaces the default category, and the outcome
   follows it — ``error`` for one of the sweep's non-model categories, else ``failed`` — so
   the record alone says whether the model is to blame (exit 1 with ``429`` in the log is
   ``error`` / ``api_or_credit``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import lru_cache
from typing import Any

import attrs

from batch.durations import format_duration
from batch.sweep.secrets import NO_SECRETS, Redactor
from run_support import jsonio
from run_support.names import RESULT_JSON
from run_support.results import (
    INFRA_FAILURE,
    MODEL_FAILURE,
    NON_MODEL_FAILURE_CATEGORIES,
    OUTCOMES,
)

#: What the runner found at ``result.json``: ``None`` when the job wrote none, the file's
#: bytes, or the ``OSError`` that stopped the runner reading it.
ResultFile = bytes | OSError | None


@attrs.frozen
class Classification:
    outcome: str
    failure_category: str | None
    stop_reason: str
    result: dict[str, Any]
    #: One line for humans (events, display): which rule decided and on what evidence.
    reason: str
    #: The job's own word on why, a string ``reason`` in its ``result.json``; None when it
    #: said nothing (then the runner quotes the last line of its log, docs/ledger.md).
    said: str | None = None


def classify(
    *,
    timed_out: bool,
    exit_code: int | None,
    signal: int | None,
    result_json: ResultFile,
    log_text_tail: Callable[[], str] | str,
    log_patterns: Mapping[str, Sequence[str]],
    start_error: str | None = None,
    non_model_categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
    timeout: float | None = None,
    exit_codes: Mapping[int, str] | None = None,
    redact: Redactor = NO_SECRETS,
) -> Classification:
    """The outcome of one attempt by the rules of docs/ledger.md (see the module docstring).

    ``exit_code`` and ``signal`` describe how the process ended (``signal`` set when a
    signal killed it). ``start_error`` is the reason the job could not be started at all.
    ``log_text_tail`` is called only when rule 4 needs the log, so a passing job never
    pays for reading it. ``non_model_categories`` (the sweep's) decide the outcome of a
    failure whose category a log pattern set. ``timeout`` is the limit that ran out, as
    the reason names it. ``exit_codes`` (the sweep's) says what an exit code means where
    the harness's convention is not 0 passed, 1 failed.
    """
    stop_reason = "signal" if signal is not None else "exit"
    if timed_out:
        how = "timeout" if timeout is None else f"timeout after {format_duration(timeout)}"
        return Classification("error", INFRA_FAILURE, "timeout", {}, how)
    if start_error is not None:
        return Classification(
            "error", INFRA_FAILURE, "exit", {"start_error": start_error}, start_error
        )
    if result_json is not None:
        return _from_result_file(result_json, stop_reason, non_model_categories, redact)
    meant = None
    if signal is None and exit_code is not None:
        meant = (exit_codes or {}).get(exit_code, _EXIT_MEANS.get(exit_code))
    if meant == "passed":
        return Classification("passed", None, stop_reason, {}, f"exit code {exit_code}")
    if meant == "failed":
        outcome, category, how = "failed", MODEL_FAILURE, f"exit code {exit_code}"
    else:
        outcome, category = "error", INFRA_FAILURE
        how = f"killed by signal {signal}" if signal is not None else f"exit code {exit_code}"
    matched = _log_category(log_text_tail, log_patterns)
    if matched is not None:
        category, pattern = matched
        how = f"{how}; output.log matches {pattern!r}"
        # The outcome follows the category, so that a reader of run-meta.json sees a rate
        # limit as the infrastructure's error without knowing the sweep's categories.
        outcome = "error" if category in non_model_categories else "failed"
    return Classification(outcome, category, stop_reason, {}, how)


#: What an exit code means without the sweep's ``exit_codes``: 0 passed, 1 failed, the
#: rest error.
_EXIT_MEANS = {0: "passed", 1: "failed"}


def _from_result_file(
    data: bytes | OSError,
    stop_reason: str,
    non_model_categories: Collection[str],
    redact: Redactor = NO_SECRETS,
) -> Classification:
    try:
        raw = _result_object(data)
    except ValueError as exc:
        return invalid_report(f"invalid result.json: {exc}", stop_reason)
    return classify_report(raw, stop_reason, non_model_categories, redact=redact)


def classify_report(
    raw: Any,
    stop_reason: str,
    non_model_categories: Collection[str],
    source: str = RESULT_JSON,
    *,
    redact: Redactor = NO_SECRETS,
) -> Classification:
    """Rule 2 over what a job reported, read already: a ``result.json``'s object, or a warm
    worker's answer (``source`` names it in the reason: ``the worker's answer``). A value
    the reason quotes is redacted before it is escaped (``redact``)."""
    try:
        outcome, category, rest = parse_result_object(raw, redact)
    except ValueError as exc:
        return invalid_report(f"invalid {source}: {exc}", stop_reason)
    how = f"{source} says {outcome}"
    said = rest.get("reason")
    if outcome == "failed" and category in non_model_categories:
        # A job that reports its rate limit as ``failed`` still did not fail as a model:
        # the record says ``error``, as for a log pattern, and keeps the job's own word.
        outcome, rest = "error", {**rest, "reported_outcome": "failed"}
    return Classification(
        outcome, category, stop_reason, rest, how, said if isinstance(said, str) else None
    )


def invalid_report(reason: str, stop_reason: str) -> Classification:
    """``error`` / ``infra_failure``: what the job reported cannot be read as an outcome."""
    return Classification(
        "error", INFRA_FAILURE, stop_reason, {"classification_error": reason}, reason
    )


def _result_object(data: bytes | OSError) -> Any:
    if isinstance(data, OSError):
        raise ValueError(f"cannot read it: {data.strerror or data}")
    try:
        return jsonio.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def parse_result_object(
    raw: Any, redact: Redactor = NO_SECRETS
) -> tuple[str, str | None, dict[str, Any]]:
    """``(outcome, failure_category, other keys)`` of a reported result (a ``result.json``'s
    object, a worker's answer); ``ValueError`` if invalid, quoting the outcome redacted
    then escaped (``redact``). ``raw`` is not changed.

    A failure without a category is the model's (``failed``) or the infrastructure's
    (``error``); a pass never has one.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"a JSON {type(raw).__name__}, not an object")
    raw = dict(raw)
    outcome = raw.pop("outcome", None)
    if not isinstance(outcome, str) or outcome.lower() not in OUTCOMES:
        shown = redact.shown(outcome)
        raise ValueError(f"outcome {shown} is not one of {', '.join(sorted(OUTCOMES))}")
    outcome = outcome.lower()
    category = raw.pop("failure_category", None)
    if category is not None and not isinstance(category, str):
        raise ValueError(f"failure_category is a {type(category).__name__}, not a string")
    if category is not None and not jsonio.is_text(category):
        # A category is counted, grouped and printed by name; a broken one names nothing.
        raise ValueError("failure_category is not valid Unicode text (a lone surrogate)")
    if outcome == "passed":
        category = None
    elif not category:
        category = MODEL_FAILURE if outcome == "failed" else INFRA_FAILURE
    # What the job spent is the runner's to read and record (run_support.usage): it never
    # decides the outcome, and a run the timeout stopped still reports it.
    raw.pop("usage", None)
    return outcome, category, raw


def _log_category(
    log_text_tail: Callable[[], str] | str, log_patterns: Mapping[str, Sequence[str]]
) -> tuple[str, str] | None:
    """``(category, pattern)`` of the first configured pattern found in the log, if any."""
    if not any(log_patterns.values()):
        return None
    text = log_text_tail() if callable(log_text_tail) else log_text_tail
    for category, patterns in log_patterns.items():
        for pattern in patterns:
            if pattern and pattern_regex(pattern).search(text):
                return category, pattern
    return None


#: A quoted line of a job's log, and a whole reason, are cut to this many characters: a
#: reason is one line on a terminal, not a copy of the log.
MAX_SAID_CHARS = 200
MAX_REASON_CHARS = 400


def finish_reason(cause: str, said: str | None, redact: Redactor = NO_SECRETS) -> str:
    """The one-line reason of a run that did not pass: what the runner knows (``cause``:
    ``exit code 1``, ``timeout after 1m00s``), then what the job said, if anything (its
    ``result.json`` ``reason``, or the last line of its log).

    Secrets are hidden before either is cut to its length: a key that straddles the cut
    would otherwise keep all but its last characters.
    """
    # Redacted before its white space is folded too: a secret may hold a line break.
    said = redact.cut(" ".join(redact(said).split()), MAX_SAID_CHARS) if said else ""
    cause = redact(cause)
    return redact.cut(f"{cause}: {said}" if said else cause, MAX_REASON_CHARS)


def last_line(text: str) -> str | None:
    """The last line of ``text`` with something on it but white space; None when none has."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


@lru_cache(maxsize=256)
def pattern_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a case-insensitive search in which a digit at either end must not
    touch another letter or digit of the log.

    So ``429`` finds ``HTTP 429`` and ``status=429,`` but not ``14290`` or a request id
    ``7fa429be``. Letters at an end still match inside a longer word: ``rate limit`` is
    meant to find ``Rate limited`` too.
    """
    before = r"(?<![0-9A-Za-z])" if pattern[:1].isdigit() else ""
    after = r"(?![0-9A-Za-z])" if pattern[-1:].isdigit() else ""
    return re.compile(before + re.escape(pattern) + after, re.IGNORECASE)
