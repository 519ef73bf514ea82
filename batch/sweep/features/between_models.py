"""The sweep's ``between_models`` and ``probe`` keys: what runs between two models.

What the sweep file says (reset and probe commands, settle, cooldown), parsed and checked;
``batch.execution.model_switch`` runs it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from batch.sweep.declare import mapping_of
from batch.sweep.nodes import (
    Node,
    as_duration,
    as_integer,
    as_positive_duration,
    is_number,
    mapping_keys,
)
from batch.sweep.placeholders import placeholder_fields

#: Placeholders a reset or probe command may use: it concerns one model, not one job.
SIDE_PLACEHOLDERS = ("model", "model_safe")
RESET_TIMEOUT = 120.0
PROBE_TIMEOUT = 600.0


@attrs.frozen
class Settle:
    epsilon_mb: float = 64.0
    plateau_polls: int = 3
    poll_interval: float = 2.0
    timeout: float = 120.0


@attrs.frozen
class SideCommand:
    """A reset or probe command: argv template (``{model}``, ``{model_safe}``) and its limit."""

    argv: tuple[str, ...]
    timeout: float


@attrs.frozen
class BetweenModels:
    reset: SideCommand | None = None
    #: None: do not wait for RAM to settle.
    settle: Settle | None = attrs.field(factory=Settle)
    cooldown: float = 0.0


# --- the keys ------------------------------------------------------------------------------


def _side_argv(node: Node) -> tuple[str, ...]:
    """A command as an argv list, or a string split as a shell would (but run without one)."""
    if isinstance(node.value, str):
        try:
            words = shlex.split(node.value)
        except ValueError as exc:
            raise node.error(f"{node.label}: {exc}") from None
        items = [(node, word) for word in words]
    elif isinstance(node.value, list):
        items = []
        for item in node.elements():
            if not (isinstance(item.value, str) or is_number(item.value)):
                raise item.type_error("a string")
            items.append((item, item.source_text() if is_number(item.value) else str(item.value)))
    else:
        raise node.type_error("a command (a list of arguments, or a string)")
    if not items or not items[0][1]:
        raise node.error(f"{node.label}: the command is empty")
    for item, word in items:
        try:
            _check_side_placeholders(word)
        except ValueError as exc:
            raise item.error(f"{item.label}: {exc}") from None
    return tuple(word for _, word in items)


def _check_side_placeholders(word: str) -> None:
    for field, spec, conversion in placeholder_fields(word):
        if spec or conversion or field not in SIDE_PLACEHOLDERS:
            raise ValueError(
                f"unknown placeholder {{{field}}} (a reset or probe command concerns a model: "
                "allowed: {model} {model_safe}; write {{ or }} for a literal brace)"
            )


def side_command_key(default_timeout: float) -> Callable[[Node], SideCommand | None]:
    """Converter for ``reset``/``probe``: a command, ``{command, timeout}``, or null."""

    def convert(node: Node) -> SideCommand | None:
        if node.value is None:
            return None
        if isinstance(node.value, Mapping):
            keys = mapping_of(node, SCHEMA_DEFS["side_command"]["anyOf"][2])
            timeout = as_positive_duration(keys["timeout"]) if "timeout" in keys else None
            return SideCommand(_side_argv(keys["command"]), timeout or default_timeout)
        return SideCommand(_side_argv(node), default_timeout)

    return convert


#: The ``probe`` key, the sweep's or a model's.
probe_key = side_command_key(PROBE_TIMEOUT)
#: ``between_models.reset``, the sweep's or a model's.
_reset_key = side_command_key(RESET_TIMEOUT)


def _between_fields(node: Node) -> dict[str, Any]:
    """The keys given in a ``between_models`` mapping, converted; ``settle`` as a dict."""
    keys = mapping_of(node, SCHEMA_DEFS["between_models"])
    fields: dict[str, Any] = {}
    if "reset" in keys:
        fields["reset"] = _reset_key(keys["reset"])
    if "settle" in keys:
        fields["settle"] = None if keys["settle"].value is None else settle_fields(keys["settle"])
    if "cooldown" in keys:
        fields["cooldown"] = as_duration(keys["cooldown"])
    return fields


def between_models_key(node: Node) -> BetweenModels | None:
    """The sweep's ``between_models`` key (null: nothing runs between models)."""
    if node.value is None:
        return None
    return resolve_between_models(BetweenModels(), _between_fields(node))


def model_between_models_key(node: Node) -> dict[str, Any]:
    """A model's ``between_models``: only the keys it overrides (``settle`` key by key)."""
    return _between_fields(node)


def resolve_between_models(
    base: BetweenModels | None, override: Mapping[str, Any] | None
) -> BetweenModels | None:
    """What runs before a model's block: the sweep's section with the model's keys on top.

    A model with overrides but a sweep without the section gets the defaults under them.
    """
    if not override:
        return base
    merged = base or BetweenModels()
    changes = dict(override)
    if isinstance(changes.get("settle"), Mapping):
        changes["settle"] = attrs.evolve(merged.settle or Settle(), **changes["settle"])
    return attrs.evolve(merged, **changes)


# --- settle ---------------------------------------------------------------------------


#: A settle's largest step in MB (a PiB): past it a value overflows a float.
MAX_EPSILON_MB = 2**30


def _epsilon(node: Node) -> float:
    if not is_number(node.value) or not 0 < node.value <= MAX_EPSILON_MB:
        raise node.type_error(f"a number of MB above 0 and at most {MAX_EPSILON_MB}")
    return float(node.value)


_SETTLE_KEYS: dict[str, Callable[[Node], Any]] = {
    "epsilon_mb": _epsilon,
    "plateau_polls": as_integer(1),
    "poll_interval": as_positive_duration,
    "timeout": as_positive_duration,
}


def settle_fields(node: Node) -> dict[str, Any]:
    """The keys given in a ``settle`` mapping, converted (the rest keep their defaults)."""
    keys = mapping_keys(node, list(_SETTLE_KEYS))
    return {name: _SETTLE_KEYS[name](value) for name, value in keys.items()}


#: ``between_models`` and ``probe``: their schemas.
BETWEEN_MODELS_SCHEMA: dict[str, Any] = {
    "anyOf": [{"$ref": "#/$defs/between_models"}, {"type": "null"}]
}
PROBE_SCHEMA: dict[str, Any] = {"$ref": "#/$defs/side_command"}

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "side_command": {
        "description": (
            "A command (an argv list, or a string split as a shell would, "
            "run without one), or {command, timeout}."
        ),
        "anyOf": [
            {"$ref": "#/$defs/command"},
            {"type": "string", "minLength": 1},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["command"],
                "properties": {
                    "command": {
                        "anyOf": [
                            {"$ref": "#/$defs/command"},
                            {"type": "string", "minLength": 1},
                        ],
                        "description": ("argv or a string; {model} and {model_safe} allowed"),
                    },
                    "timeout": {
                        "description": (
                            "how long it may take (a reset 2m, a probe 10m by default)"
                        ),
                        "$ref": "#/$defs/duration",
                    },
                },
            },
        ],
    },
    "settle": {
        "description": ("Wait for available RAM to stop changing before a model's block."),
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "epsilon_mb": {
                        "description": (
                            "RAM readings within this many MB of each other count as settled"
                        ),
                        "type": "number",
                        "minimum": 0,
                        "default": 64,
                    },
                    "plateau_polls": {
                        "description": "that many readings in a row",
                        "type": "integer",
                        "minimum": 1,
                        "default": 3,
                    },
                    "poll_interval": {
                        "description": "time between readings",
                        "$ref": "#/$defs/duration",
                        "default": "2s",
                    },
                    "timeout": {
                        "description": "give up waiting after this long",
                        "$ref": "#/$defs/duration",
                        "default": "2m",
                    },
                },
            },
        ],
    },
    "between_models": {
        "description": (
            "What runs before each model's block (order: model-major): a "
            "reset, a RAM settle, a cooldown."
        ),
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "reset": {
                "description": "a command that unloads the previous model",
                "anyOf": [{"$ref": "#/$defs/side_command"}, {"type": "null"}],
                "default": None,
            },
            "settle": {"$ref": "#/$defs/settle"},
            "cooldown": {
                "description": "a wait after the reset and settle",
                "$ref": "#/$defs/duration",
                "default": 0,
            },
        },
    },
}
