"""The ``worker`` key: a program that starts once per slot and serves many jobs (issue 32).

``worker: [python3, harness.py]`` or ``worker: {command: [...], concurrency: N}``, at the top
of the sweep (in place of ``command``) or on a model (its jobs only). The protocol it speaks
is docs/worker.md; the driver side is ``batch.attempt.worker_pool``. Its converter,
:func:`worker_key`, is one row of the key table (``batch.sweep.keys.KEYS``) and of a model's keys.

A worker serves many jobs, so its argv holds no job's value: of the placeholders only
``{batch_dir}`` is filled in; a job's ``case``, ``model``, ``run_dir`` ... come in each
request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from batch.sweep.nodes import Node, argv_elements, as_integer, checked, mapping_keys
from batch.sweep.placeholders import check_placeholders, placeholder_fields

__all__ = ["WORKER_PLACEHOLDERS", "WorkerSpec", "worker_key"]

#: The placeholders a worker's argv may hold: the same for every job it serves.
WORKER_PLACEHOLDERS = ("batch_dir",)
_HINT = "an argv list, or {command: [...], concurrency: N}"


@attrs.frozen
class WorkerSpec:
    """How to start one worker, and how many requests it serves at once."""

    command: tuple[str, ...]
    #: Requests one worker has in flight at once (an async harness serves several).
    concurrency: int = 1


def worker_key(node: Node) -> WorkerSpec | None:
    """``[PROGRAM, ARGS...]``, null (none), or ``{command, concurrency}``."""
    if node.value is None:
        return None
    if isinstance(node.value, list):
        return WorkerSpec(_argv(node))
    if not isinstance(node.value, Mapping):
        raise node.type_error(_HINT)
    keys = mapping_keys(node, ("command", "concurrency"), required=("command",))
    concurrency = as_integer(1)(keys["concurrency"]) if "concurrency" in keys else 1
    return WorkerSpec(_argv(keys["command"]), concurrency)


def _argv(node: Node) -> tuple[str, ...]:
    if not isinstance(node.value, list):
        raise node.type_error("a list of strings (it runs without a shell)")
    if not node.value:
        raise node.error(f"{node.label}: is empty")
    return argv_elements(node, lambda item: checked(item, _check_worker_placeholders))


def _check_worker_placeholders(arg: str) -> None:
    check_placeholders(arg)
    for field, _, _ in placeholder_fields(arg):
        if field not in WORKER_PLACEHOLDERS:
            raise ValueError(
                f"{{{field}}} is one job's value and a worker serves many: read it from each "
                "request (docs/worker.md); only {batch_dir} may be used here"
            )


#: ``worker``: its schema.
WORKER_SCHEMA: dict[str, Any] = {"$ref": "#/$defs/worker"}

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "worker": {
        "description": (
            "A warm worker (docs/worker.md): a program started once per "
            "slot that serves many jobs over stdin/stdout, one JSON request"
            " and one JSON answer per line. An argv list (only {batch_dir} "
            "is filled in), or {command, concurrency}."
        ),
        "anyOf": [
            {"$ref": "#/$defs/command"},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["command"],
                "properties": {
                    "command": {"$ref": "#/$defs/command"},
                    "concurrency": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 1,
                        "description": ("requests one worker serves at once (an async harness)"),
                    },
                },
            },
            {"type": "null"},
        ],
    },
}
