"""What a notify command is given (docs/notify.md): the event as one JSON object on stdin
(:func:`event_payload`, with a one-line :func:`event_message`) and the ``BATCH_*``
variables (:data:`ENV_VARS`, :func:`notify_env`), every string redacted. Pure; running the
commands is ``batch.notify.commands``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from batch.durations import format_duration

__all__ = ["ENV_VARS", "event_message", "event_payload", "notify_env", "payload_bytes"]

#: Count variables: ``BATCH_<STATUS>`` for each job status (batch.jobs.STATUSES).
_COUNTED = ("passed", "failed", "error", "skipped", "pending", "running")
#: Every variable :func:`notify_env` sets, documented in docs/notify.md.
ENV_VARS = (
    "BATCH_EVENT",
    "BATCH_DIR",
    "BATCH_ID",
    "BATCH_STATE",
    "BATCH_JOBS",
    *(f"BATCH_{status.upper()}" for status in _COUNTED),
    "BATCH_MESSAGE",
)


def event_payload(
    event: str,
    *,
    batch_dir: Path,
    state: str,
    statuses: Iterable[str],
    stamp: str,
    message: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The JSON object a notify command reads on stdin (docs/notify.md, "stdin").

    ``statuses`` is every job's status; ``fields`` are the event's own (``reason`` of a
    halt, ``stalled_seconds`` of a stall, ``exit_status`` of an end, ...). ``message``
    defaults to :func:`event_message`.
    """
    counts = dict.fromkeys(_COUNTED, 0)
    total = 0
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
        total += 1
    if message is None:
        message = event_message(event, batch_dir.name, state, counts, fields)
    return {
        "event": event,
        "t": stamp,
        "batch_id": batch_dir.name,
        "batch_dir": str(batch_dir),
        "state": state,
        "jobs": total,
        "counts": counts,
        "message": message,
        **fields,
    }


def event_message(
    event: str, batch_id: str, state: str, counts: Mapping[str, int], fields: Mapping[str, Any]
) -> str:
    """One line a phone can show: what happened to which batch, and the counts so far."""
    tally = ", ".join(f"{counts[s]} {s}" for s in _COUNTED if counts.get(s)) or "no jobs"
    running = counts.get("running", 0)
    if event == "stall":
        quiet = format_duration(float(fields.get("stalled_seconds", 0.0)))
        return f"{batch_id}: stalled, no job finished for {quiet} ({running} running; {tally})"
    if event == "recovered":
        return f"{batch_id}: recovered, a job finished again ({tally})"
    if event == "halt":
        why = f" ({fields['reason']})" if fields.get("reason") else ""
        return f"{batch_id} halted{why}: {tally}"
    if event == "interrupt":
        return f"{batch_id} interrupted: starting no new jobs ({tally})"
    return f"{batch_id} {state}: {tally}"


def notify_env(
    payload: Mapping[str, Any], base: Mapping[str, str], redact: Callable[[str], str]
) -> dict[str, str]:
    """``base`` (passed as it is) plus the ``BATCH_*`` variables of ``payload``, redacted."""
    counts = payload["counts"]
    added = {
        "BATCH_EVENT": payload["event"],
        "BATCH_DIR": payload["batch_dir"],
        "BATCH_ID": payload["batch_id"],
        "BATCH_STATE": payload["state"],
        "BATCH_JOBS": str(payload["jobs"]),
        **{f"BATCH_{status.upper()}": str(counts.get(status, 0)) for status in _COUNTED},
        "BATCH_MESSAGE": payload["message"],
    }
    # A NUL cannot be in an environment value; a batch dir name could hold one only if
    # something hostile made it, and the notifier must still run.
    return {**base, **{k: redact(v).replace("\0", "") for k, v in added.items()}}


def payload_bytes(payload: Mapping[str, Any], redact: Callable[[str], str]) -> bytes:
    """``payload`` as one JSON line, every string in it redacted (keys included)."""
    return (json.dumps(_redact_json(payload, redact), ensure_ascii=False) + "\n").encode(
        errors="surrogateescape"
    )


def _redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): _redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_json(item, redact) for item in value]
    return value
