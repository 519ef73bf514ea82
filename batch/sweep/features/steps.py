"""The sweep's ``steps`` key: a multi-step job's steps, parsed and checked.

``batch.attempt.steps`` runs them; ``batch.plan.resume`` decides which a new attempt reuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from batch.sweep.nodes import Node, as_name, as_positive_duration, as_words, mapping_keys
from batch.sweep.placeholders import check_placeholders

_STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@attrs.frozen
class Step:
    name: str
    command: tuple[str, ...]
    #: Seconds; None: only the job's timeout applies.
    timeout: float | None = None
    #: Paths (relative to the run dir, placeholders allowed) the step must leave behind.
    expect: tuple[str, ...] = ()


# --- the key ---------------------------------------------------------------------------


def steps_key(node: Node, command: Callable[[Node], tuple[str, ...]]) -> tuple[Step, ...]:
    """The sweep's ``steps``; ``command`` converts each step's command as the sweep's own."""
    if not isinstance(node.value, list):
        raise node.type_error("a list of steps ({name, command, timeout, expect})")
    if not node.value:
        raise node.error(f"{node.label}: is empty (a job needs at least one step)")
    steps: list[Step] = []
    first: dict[str, Node] = {}
    for item in node.elements():
        keys = mapping_keys(item, ("name", "command", "timeout", "expect"), ("name", "command"))
        name = as_name(keys["name"], "step name")
        if not _STEP_NAME.fullmatch(name):
            raise keys["name"].error(
                f"{keys['name'].label}: a step name is letters, digits, '.', '_' and '-', "
                f"got {name!r}"
            )
        if name in first:
            raise keys["name"].error(
                f"{keys['name'].label}: duplicate step name {name!r} "
                f"(first at line {first[name].line + 1})"
            )
        first[name] = keys["name"]
        timeout = keys.get("timeout")
        steps.append(
            Step(
                name=name,
                command=command(keys["command"]),
                timeout=None if timeout is None or timeout.value is None
                else as_positive_duration(timeout, " (null means only the job's timeout)"),
                expect=as_words(keys["expect"], "path", check_placeholders)
                if "expect" in keys else (),
            )
        )  # fmt: skip
    return tuple(steps)


def template_nodes(node: Node) -> Iterator[Node]:
    """Every string a step fills placeholders into (command items, expect paths)."""
    for item in node.elements():
        for key, value in item.entries():
            if key.value in ("command", "expect") and isinstance(value.value, list):
                yield from value.elements()


#: ``steps``: its schema.
STEPS_SCHEMA: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/step"}}

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "step": {
        "description": "One step of a multi-step job.",
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "command"],
        "properties": {
            "name": {
                "description": "unique within the sweep; letters, digits, ., _, -",
                "type": "string",
                "pattern": "^[A-Za-z0-9._-]+$",
            },
            "command": {"$ref": "#/$defs/command"},
            "timeout": {
                "description": "this step's limit, within the job's",
                "anyOf": [{"$ref": "#/$defs/duration"}, {"type": "null"}],
                "default": None,
            },
            "expect": {
                "description": ("files the step must leave behind, relative to the run dir"),
                "type": "array",
                "items": {"type": "string"},
                "default": [],
            },
        },
    },
}
