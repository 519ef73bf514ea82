"""Placeholders in a sweep's command: which there are, checking them, filling them in.

A command argument may hold ``{case}``, ``{model}`` ... (``PLACEHOLDERS``) and
``{params.NAME}`` (a case's params); ``{{``/``}}`` are literal braces. ``load_sweep`` checks
every argument with ``check_placeholders``; the runner builds each job's argv with
``expand_command``. Pure: there is no shell, so each argument stays one argument.
"""

from __future__ import annotations

import difflib
import string
from collections.abc import Mapping, Sequence
from typing import Any

#: Placeholders a command may use besides ``{params.NAME}``.
PLACEHOLDERS = (
    "case",
    "model",
    "model_safe",
    "run_dir",
    "batch_dir",
    "attempt",
    "container_label",
    "repeat",
)
PARAMS_PREFIX = "params."


def expand_command(
    command: Sequence[str], values: Mapping[str, object], params: Mapping[str, Any]
) -> list[str]:
    """The argv for one job: placeholders filled from ``values`` (keys of ``PLACEHOLDERS``)
    and ``params`` (``{params.NAME}``); ``{{``/``}}`` become literal braces. Each argument
    stays one argument whatever the values contain: there is no shell.
    """
    argv = []
    for arg in command:
        pieces = []
        for literal, field, _, _ in string.Formatter().parse(arg):
            pieces.append(literal)
            if field is not None:
                value = (
                    params[field[len(PARAMS_PREFIX) :]]
                    if field.startswith(PARAMS_PREFIX)
                    else values[field]
                )
                pieces.append(_argv_text(value))
        argv.append("".join(pieces))
    return argv


def _argv_text(value: object) -> str:
    if isinstance(value, bool):  # as YAML spells it, not Python's True
        return "true" if value else "false"
    return str(value)


def placeholder_fields(arg: str) -> list[tuple[str, str | None, str | None]]:
    """(field, format spec, conversion) of each placeholder in a command argument.

    Raises ``ValueError`` with a message fit to show a user on an unmatched brace.
    """
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as exc:
        raise ValueError(f"{exc} (write {{{{ or }}}} for a literal brace)") from None
    return [(field, spec, conv) for _, field, spec, conv in parsed if field is not None]


def check_placeholders(arg: str) -> None:
    """Raise ``ValueError`` (a message fit to show a user) unless every placeholder in
    ``arg`` is known and plain (no format spec or conversion)."""
    unknown: list[str] = []
    for field, spec, conversion in placeholder_fields(arg):
        if spec or conversion:
            raise ValueError("format specs and conversions are not supported")
        if field in PLACEHOLDERS or (
            field.startswith(PARAMS_PREFIX) and len(field) > len(PARAMS_PREFIX)
        ):
            continue
        close = difflib.get_close_matches(field, PLACEHOLDERS, n=1)
        unknown.append(f"{{{field}}}" + (f" (did you mean {{{close[0]}}}?)" if close else ""))
    if unknown:
        allowed = " ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        many = "s" if len(unknown) > 1 else ""
        raise ValueError(
            f"unknown placeholder{many} {', '.join(unknown)}; allowed: {allowed} "
            "{params.NAME}; write {{ or }} for a literal brace"
        )


def param_names(arg: str) -> list[str]:
    """The NAMEs of the ``{params.NAME}`` placeholders in ``arg``, in order."""
    return [
        field[len(PARAMS_PREFIX) :]
        for field, _, _ in placeholder_fields(arg)
        if field.startswith(PARAMS_PREFIX)
    ]
