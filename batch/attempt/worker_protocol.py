"""The driver's side of the warm-worker protocol (docs/worker.md), as pure functions.

A request is one JSON object on a line (``id``, ``case``, ``model``, ``repeat``,
``attempt``, ``run_dir``, ``params``, ``env``); an answer is one JSON object on a line of
the worker's stdout with the request's ``id`` and an ``outcome``, and the other fields a
``result.json`` may hold. What a line of stdout is — an answer to a request in flight, an
answer to none, or not an answer at all — and what an answer's outcome is, are decided
here over plain data; ``batch.attempt.worker_pool`` runs the processes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from batch.attempt.classify import Classification, classify, classify_report, invalid_report
from batch.sweep.secrets import NO_SECRETS, Redactor
from run_support import jsonio
from run_support.results import INFRA_FAILURE
from run_support.usage import NOTHING_REPORTED, ParsedUsage, parse_usage

__all__ = [
    "Answer",
    "Stray",
    "WrongId",
    "answer_usage",
    "answer_verdict",
    "died_verdict",
    "read_stdout_line",
    "request_line",
    "unanswered_verdict",
]

#: The ``stop_reason`` of a job a worker answered: no process of its own ended.
ANSWERED = "answer"
#: A line of stdout longer than this is no answer.
MAX_ANSWER_BYTES = 1 << 20
#: Of a line that is no answer, this many characters are logged.
MAX_LOGGED_CHARS = 2000


def request_line(
    request_id: str,
    *,
    case: str,
    model: str,
    repeat: int,
    attempt: int,
    run_dir: str,
    params: Mapping[str, Any],
    env: Mapping[str, str],
) -> bytes:
    """One request, a line of JSON. ASCII-escaped: an environment value the OS gave as
    undecodable bytes (a lone surrogate here) is still one valid line."""
    request = {
        "id": request_id,
        "case": case,
        "model": model,
        "repeat": repeat,
        "attempt": attempt,
        "run_dir": run_dir,
        "params": dict(params),
        "env": dict(env),
    }
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


@attrs.frozen
class Answer:
    """An answer to request ``id``: ``fields`` are the rest of the object, ``id`` left out."""

    id: str
    fields: dict[str, Any]


@attrs.frozen
class WrongId:
    """A JSON object with an ``id`` and an ``outcome`` that answers no request in flight:
    ``id`` as matched, ``given`` the value as the worker wrote it (to be quoted)."""

    id: str
    text: str
    given: Any = attrs.field(default=None, eq=False)


@attrs.frozen
class Stray:
    """A line of stdout that is not an answer: logged, never taken as one."""

    text: str


def read_stdout_line(line: bytes, in_flight: Collection[str]) -> Answer | WrongId | Stray:
    """What ``line`` (one line of a worker's stdout) is, given the ids of the requests in
    flight. An answer is a JSON object with an ``id`` and an ``outcome``; anything else a
    harness prints (a progress line, a stray JSON value) is a :class:`Stray`."""
    text = line.decode("utf-8", "replace").rstrip("\r\n")[:MAX_LOGGED_CHARS]
    raw = _json_object(line) if len(line) <= MAX_ANSWER_BYTES else None
    if raw is None or "id" not in raw or "outcome" not in raw:
        return Stray(text)
    ident = raw.pop("id")
    key = ident if isinstance(ident, str) else json.dumps(ident)
    if key not in in_flight:
        return WrongId(key, text, ident)
    return Answer(key, raw)


def _json_object(line: bytes) -> dict[str, Any] | None:
    """``line`` as a JSON object; None when it is no JSON, or JSON but not an object (a
    line that does not start with ``{`` is not even parsed: a harness's progress lines)."""
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        raw = jsonio.loads(line)
    except ValueError:
        return None
    return raw if isinstance(raw, dict) else None


def answer_verdict(
    answer: Answer, non_model_categories: Collection[str], redact: Redactor = NO_SECRETS
) -> Classification:
    """The outcome an answer reports, by the rules of a ``result.json`` (docs/ledger.md,
    rule 2); an invalid outcome is ``error`` / ``infra_failure`` with the reason why."""
    return classify_report(
        answer.fields,
        ANSWERED,
        non_model_categories,
        source="the worker's answer",
        redact=redact,
    )


def answer_usage(answer: Answer) -> ParsedUsage:
    """What the answer says the job spent (its ``usage``), as a ``result.json``'s."""
    if "usage" not in answer.fields:
        return NOTHING_REPORTED
    return parse_usage(answer.fields["usage"])


def wrong_id_verdict(
    wrong: WrongId, expected: Collection[str], redact: Redactor = NO_SECRETS
) -> Classification:
    """A worker that answered an id no request in flight has: its requests' answers cannot
    be trusted, so each is ``error`` / ``infra_failure`` (and the worker is replaced). The
    id it gave is quoted redacted, then escaped."""
    wanted = ", ".join(repr(ident) for ident in sorted(expected)) or "none"
    return invalid_report(
        f"the worker answered request id {wrong_id_shown(wrong, redact)}, not one in flight "
        f"({wanted})",
        ANSWERED,
    )


def wrong_id_shown(wrong: WrongId, redact: Redactor = NO_SECRETS) -> str:
    """The id a worker answered that no request has, as a reason quotes it: redacted, then
    escaped (a secret holding a backslash is found before ``repr`` doubles it)."""
    return redact.shown(wrong.given if wrong.given is not None else wrong.id)


def died_verdict(returncode: int | None, *, why: str | None = None) -> Classification:
    """``error`` / ``infra_failure``: the worker ended before it answered (a non-model
    failure, retried by the usual rules). ``why``: the driver stopped it, and for what."""
    if why is not None:
        how = why
    elif returncode is not None and returncode < 0:
        how = f"the worker was killed by signal {-returncode} before answering"
    else:
        how = f"the worker exited with status {returncode} before answering"
    stop = "signal" if returncode is not None and returncode < 0 else "exit"
    return Classification("error", INFRA_FAILURE, stop, {}, how)


def unanswered_verdict(
    *, timeout: float | None = None, start_error: str | None = None
) -> Classification:
    """``error`` / ``infra_failure`` of a request that got no answer: timed out (``timeout``,
    the limit that ran out) or never sent (``start_error``: the worker did not start), by
    the same rules as a command's (``batch.attempt.classify``)."""
    return classify(
        timed_out=start_error is None,
        exit_code=None,
        signal=None,
        result_json=None,
        log_text_tail="",
        log_patterns={},
        start_error=start_error,
        timeout=timeout,
    )
