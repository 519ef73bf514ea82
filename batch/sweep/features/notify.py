"""The ``notify`` sweep key: which commands run on which batch events, for how long.

``notify_key`` reads it (a located value in, :class:`NotifySpec` out, located errors) for
``batch.sweep``'s key table; running the commands is ``batch.notify.commands``. Documented in
docs/notify.md.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

import attrs

from batch.sweep.declare import mapping_of
from batch.sweep.nodes import (
    Node,
    argv_elements,
    as_positive_duration,
    as_words,
)

__all__ = ["DEFAULT_TIMEOUT", "EVENTS", "NotifySpec", "notify_key"]

#: Every event a notify command can be run on; the ``events`` key picks among them.
EVENTS = ("end", "halt", "interrupt", "stall", "recovered")
DEFAULT_TIMEOUT = 30.0


@attrs.frozen
class NotifySpec:
    """The ``notify`` key: the commands, their time limit and the events they are run on."""

    commands: tuple[tuple[str, ...], ...]
    timeout: float = DEFAULT_TIMEOUT
    events: frozenset[str] = frozenset(EVENTS)


# --- the sweep key ---------------------------------------------------------------------------


def notify_key(node: Node) -> NotifySpec | None:
    """``notify``: one argv list, a list of them, or ``{commands, timeout, events}``; null: off."""
    if node.value is None:
        return None
    if not isinstance(node.value, Mapping):
        return NotifySpec(_commands(node))
    keys = mapping_of(node, NOTIFY_SCHEMA["anyOf"][3])
    timeout = as_positive_duration(keys["timeout"]) if "timeout" in keys else DEFAULT_TIMEOUT
    events = frozenset(EVENTS)
    if "events" in keys:
        events = frozenset(as_words(keys["events"]))
        unknown = sorted(events - set(EVENTS))
        if unknown:
            node = keys["events"]
            known = ", ".join(EVENTS)
            raise node.error(f"{node.label}: unknown event {unknown[0]!r} (events: {known})")
    return NotifySpec(_commands(keys["commands"]), timeout, events)


def _commands(node: Node) -> tuple[tuple[str, ...], ...]:
    """``[prog, arg]`` is one command, ``[[prog, arg], [prog2]]`` several."""
    if isinstance(node.value, str):
        raise node.error(
            f"{node.label}: must be a list of arguments (it runs without a shell), "
            f"e.g. {json.dumps(shlex.split(node.value) if _splits(node.value) else [node.value])}"
        )
    if not isinstance(node.value, list) or not node.value:
        raise node.type_error("a command (a list of arguments) or a list of commands")
    items = list(node.elements())
    if all(isinstance(item.value, list) for item in items):
        return tuple(_argv(item) for item in items)
    return (_argv(node),)


def _splits(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def _argv(node: Node) -> tuple[str, ...]:
    if not isinstance(node.value, list) or not node.value:
        raise node.type_error("a non-empty list of arguments")
    return argv_elements(node)


#: ``notify``: its schema.
NOTIFY_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "null"},
        {"$ref": "#/$defs/command"},
        {"type": "array", "items": {"$ref": "#/$defs/command"}},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["commands"],
            "properties": {
                "commands": {
                    "anyOf": [
                        {"$ref": "#/$defs/command"},
                        {
                            "type": "array",
                            "items": {"$ref": "#/$defs/command"},
                        },
                    ],
                    "description": "a command, or a list of commands",
                },
                "timeout": {
                    "description": "per command and event",
                    "$ref": "#/$defs/duration",
                    "default": "30s",
                },
                "events": {
                    "description": "the events the commands run on",
                    "type": "array",
                    "items": {
                        "enum": [
                            "end",
                            "halt",
                            "interrupted",
                            "stall",
                            "recovered",
                        ],
                    },
                    "default": [
                        "end",
                        "halt",
                        "interrupted",
                        "stall",
                        "recovered",
                    ],
                },
            },
        },
    ],
}
