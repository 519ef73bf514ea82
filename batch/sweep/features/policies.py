"""The sweep keys of the policies (docs/policies.md): located converters for the key table.

Each takes a located value (``batch.sweep.nodes.Node``) and raises a located ``SweepError``,
as every sweep key does:

- ``halt``: ``off``, a rule string (``soon,fail=3``) or ``{rule, broken_setup,
  broken_setup_window}`` → :class:`~batch.policies.halt.HaltConfig`;
- ``breaker`` (the sweep's, and a model's that overrides the fields it names): ``off`` or
  ``{threshold, categories, cooldown}`` → the fields it sets, applied by
  :func:`resolve_breaker`;
- a model's ``adaptive``: ``true``, ``false`` or ``{raise_after, initial}`` →
  :class:`AdaptiveSpec`, made an :class:`~batch.policies.aimd.AimdConfig` by
  :func:`aimd_config` once the model's ceiling is known.

- ``budget`` (the sweep's, and a model's): ``{cost_usd, tokens}`` →
  :class:`~batch.policies.spend.Budget`.

``max_attempts`` needs nothing new: ``as_integer(1)``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import attrs

from batch.policies.aimd import AimdConfig
from batch.policies.breaker import BreakerConfig
from batch.policies.halt import HALT_OFF, HaltConfig, parse_halt
from batch.policies.spend import LIMITS, Budget, parse_budget
from batch.sweep.declare import mapping_of
from batch.sweep.nodes import (
    Node,
    as_integer,
    as_positive_duration,
    as_string,
    as_words,
    checked,
    mapping_keys,
)


def _is_off(node: Node) -> bool:
    """``off`` as written (YAML 1.2 reads it as a string) or ``false``."""
    return node.value is False or (isinstance(node.value, str) and node.value.strip() == "off")


def _as_bool(node: Node) -> bool:
    if not isinstance(node.value, bool):
        raise node.type_error("true or false")
    return bool(node.value)


def halt_key(node: Node) -> HaltConfig:
    if _is_off(node):
        return HALT_OFF
    if isinstance(node.value, str):
        return checked(node, parse_halt)
    if not isinstance(node.value, Mapping):
        raise node.type_error("off, a rule such as soon,fail=3, or a mapping")
    keys = mapping_of(node, HALT_SCHEMA["anyOf"][2])
    rule = None
    if "rule" in keys:
        rule_node = keys["rule"]
        parsed = checked(rule_node, lambda value: parse_halt(as_string(rule_node)))
        if parsed.rule is None:
            raise rule_node.error(f"{rule_node.label}: write broken_setup: false for off")
        rule = parsed.rule
    setup = _as_bool(keys["broken_setup"]) if "broken_setup" in keys else True
    window = keys.get("broken_setup_window")
    return HaltConfig(
        rule=rule,
        setup_rule=setup,
        setup_window=None if window is None else as_integer(1)(window),
    )


def breaker_key(node: Node) -> dict[str, Any]:
    """The breaker fields ``node`` sets (``{"enabled": False}`` for ``off``)."""
    if _is_off(node):
        return {"enabled": False}
    keys = mapping_of(node, SCHEMA_DEFS["breaker"]["anyOf"][2])
    fields: dict[str, Any] = {}
    if "threshold" in keys:
        fields["threshold"] = as_integer(1)(keys["threshold"])
    if "categories" in keys:
        categories = as_words(keys["categories"], "failure category")
        if not categories:
            raise keys["categories"].error(f"{keys['categories'].label}: is empty")
        fields["categories"] = frozenset(categories)
    if "cooldown" in keys:
        cooldown = keys["cooldown"]
        fields["cooldown"] = (
            None
            if cooldown.value is None
            else as_positive_duration(cooldown, " (null means no cooldown)")
        )
    return fields


def resolve_breaker(
    sweep_fields: Mapping[str, Any], model_fields: Mapping[str, Any] | None
) -> BreakerConfig:
    """A model's breaker: the defaults, then the sweep's fields, then the model's."""
    config = attrs.evolve(BreakerConfig(), **sweep_fields)
    if model_fields:
        # A model that tunes its breaker wants one, even where the sweep's is off.
        config = attrs.evolve(config, **{"enabled": True, **model_fields})
    return config


@attrs.frozen
class AdaptiveSpec:
    """A model's ``adaptive``, before its ceiling is known."""

    raise_after: int | None = None
    initial: int | None = None


def adaptive_key(node: Node) -> AdaptiveSpec | None:
    """``true`` → adaptive with the defaults; ``false`` → None; or ``{raise_after, initial}``."""
    if isinstance(node.value, bool):
        return AdaptiveSpec() if node.value else None
    if not isinstance(node.value, Mapping):
        raise node.type_error("true, false or a mapping {raise_after, initial}")
    keys = mapping_keys(node, ("raise_after", "initial"))
    return AdaptiveSpec(
        raise_after=as_integer(1)(keys["raise_after"]) if "raise_after" in keys else None,
        initial=as_integer(1)(keys["initial"]) if "initial" in keys else None,
    )


def aimd_config(spec: AdaptiveSpec, max_concurrent: int) -> AimdConfig:
    """The model's AIMD config under its ceiling; ``ValueError`` if ``initial`` is above it."""
    if spec.initial is not None and spec.initial > max_concurrent:
        raise ValueError(
            f"adaptive.initial {spec.initial} is above the model's max_concurrent {max_concurrent}"
        )
    return AimdConfig(
        max_concurrent=max_concurrent, raise_after=spec.raise_after, initial=spec.initial
    )


def budget_key(node: Node) -> Budget:
    """``{cost_usd: 50, tokens: 2_000_000}``: each limit checked where it is written."""
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping with cost_usd and/or tokens")
    keys = mapping_keys(node, LIMITS)
    if not keys:
        raise node.error(f"{node.label}: names no limit (give cost_usd and/or tokens)")
    for name, item in keys.items():
        checked(item, functools.partial(_one_limit, name))
    return checked(node, parse_budget)


def _one_limit(name: str, value: Any) -> Budget:
    return parse_budget({name: value})


# --- back to YAML, for the sweep snapshot (batch.sweep_snapshot), which load_sweep reads --


def halt_snapshot(config: HaltConfig) -> str | dict[str, Any]:
    """``config`` as the ``halt`` value that :func:`halt_key` reads back to it."""
    if config == HALT_OFF:
        return "off"
    data: dict[str, Any] = {"broken_setup": config.setup_rule}
    if config.rule is not None:
        data["rule"] = config.rule.text
    if config.setup_window is not None:
        data["broken_setup_window"] = config.setup_window
    return data


def breaker_snapshot(fields: Mapping[str, Any]) -> str | dict[str, Any]:
    """The fields :func:`breaker_key` read, as the value it reads back to them."""
    if fields.get("enabled") is False:
        return "off"
    data = dict(fields)
    if "categories" in data:
        data["categories"] = sorted(data["categories"])
    return data


def adaptive_snapshot(spec: AdaptiveSpec | None) -> bool | dict[str, int]:
    if spec is None:
        return False
    data = {key: value for key, value in attrs.asdict(spec).items() if value is not None}
    return data or True


def budget_snapshot(budget: Budget) -> dict[str, float | int]:
    """``budget`` as the value :func:`budget_key` reads back to it: the limits it sets."""
    return {key: value for key, value in attrs.asdict(budget).items() if value is not None}


#: ``halt``, ``breaker`` and ``budget``: their schemas.
HALT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"const": False},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "rule": {
                    "type": ["string", "null"],
                    "description": "soon|now,fail|error=N[%], or null for none",
                },
                "broken_setup": {
                    "type": "boolean",
                    "description": (
                        "the broken-setup rule: the first attempts all "
                        "ending in the same non-model failure halt soon"
                    ),
                },
                "broken_setup_window": {
                    "type": "integer",
                    "minimum": 1,
                    "description": (
                        "how many first attempts that rule looks at "
                        "(default max(8, 2 \u00d7 max_concurrent))"
                    ),
                },
            },
        },
    ],
}
BREAKER_SCHEMA: dict[str, Any] = {"$ref": "#/$defs/breaker"}
BUDGET_SCHEMA: dict[str, Any] = {"$ref": "#/$defs/budget"}

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "breaker": {
        "description": "The per-model circuit breaker, or off.",
        "anyOf": [
            {"const": "off"},
            {"const": False},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "threshold": {
                        "description": "consecutive non-model failures that open it",
                        "type": "integer",
                        "minimum": 1,
                        "default": 5,
                    },
                    "categories": {
                        "description": "the failure categories it counts",
                        "type": "array",
                        "items": {"type": "string"},
                        "default": ["api_or_credit", "infra_failure"],
                    },
                    "cooldown": {
                        "description": (
                            "after this long one trial job half-opens it; null: stays open"
                        ),
                        "anyOf": [
                            {"$ref": "#/$defs/duration"},
                            {"type": "null"},
                        ],
                        "default": None,
                    },
                },
            },
        ],
    },
    "budget": {
        "description": "What may be spent, as jobs report it.",
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "properties": {
            "cost_usd": {
                "description": "US dollars, a number > 0",
                "type": "number",
                "exclusiveMinimum": 0,
            },
            "tokens": {
                "description": "input plus output tokens, a whole number > 0",
                "type": "integer",
                "exclusiveMinimum": 0,
            },
        },
    },
}
