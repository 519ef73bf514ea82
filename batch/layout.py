"""File names made from case and model names: readable, unique, and unable to escape.

Names are cosmetic — identity always comes from ``run-meta.json`` — so the only duties here
are that a name reads like the original, that it is one harmless path component (never
``.``, ``..``, empty, hidden or containing ``/``), and that it stays short enough for any
filesystem.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

#: Longest component :func:`safe_name` returns; a run dir name is two of them plus ~35.
MAX_NAME = 80
_HASH_LEN = 8
_SEPARATORS = re.compile(r"[/:]")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
#: Top-level entries of a batch dir that belong to the driver; a model dir must not be one.
#: The batch dir's summary of every job (docs/summary.md).
SUMMARY_NAME = "batch-summary.json"
RESERVED_DIRS = frozenset({"batch-logs", "batch-summary.json", "sweep.yaml"})


def safe_name(name: str) -> str:
    """``name`` as one path component: ``openai/gpt-4o`` → ``openai--gpt-4o``.

    Every character outside ``[A-Za-z0-9._-]`` becomes ``-``, and ``/`` or ``:`` become
    ``--`` so a provider prefix stays visible. Leading dots become ``-`` (no hidden, ``.``
    or ``..`` names), empty becomes ``-``. Past :data:`MAX_NAME` characters the name is cut
    and a hash of the full original appended, so distinct long names stay distinct.
    """
    safe = _UNSAFE.sub("-", _SEPARATORS.sub("--", name))
    stripped = safe.lstrip(".")
    safe = "-" * (len(safe) - len(stripped)) + stripped
    if not safe:
        return "-"
    if len(safe) > MAX_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
        safe = f"{safe[: MAX_NAME - _HASH_LEN - 1]}-{digest}"
    return safe


def model_dir_name(model: str) -> str:
    """The directory under the batch dir that holds ``model``'s run dirs."""
    name = safe_name(model)
    # A model literally named "batch-logs" must not have its records hidden among driver files.
    return f"{name}-model" if name in RESERVED_DIRS else name


def run_stamp(moment: float) -> str:
    """UTC stamp for a run dir name, to the microsecond: ``20261130T031500123456Z``."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y%m%dT%H%M%S%fZ")


def run_dir_name(case: str, model: str, stamp: str, attempt: int) -> str:
    """``<case_safe>-<model_safe>-<stamp>-a<attempt>``, e.g. ``c01-openai--gpt-4o-…-a1``."""
    return f"{safe_name(case)}-{safe_name(model)}-{stamp}-a{attempt}"
