"""The sweep's models: :class:`ModelSpec` and the ``models`` key, and the ``env`` key (the
sweep's or a model's), each declared once: converter and schema (:data:`MODELS`,
:data:`ENV`, :data:`SCHEMA_DEFS`).

``models_key`` reads ``models`` (ids or ``{id, max_concurrent, env, between_models, probe,
adaptive, max_attempts, budget, repeats, worker}`` objects): a non-empty list with unique ids.
``env_key`` reads an ``env`` mapping, expanding ``${VAR}``. The cases are
:mod:`batch.sweep.cases`.

Converters take a located value (``batch.sweep.nodes.Node``) and raise located errors, as
every sweep key does; ``batch.sweep`` puts them in its key table and re-exports the specs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from batch.policies.aimd import AimdConfig
from batch.policies.spend import Budget
from batch.sweep import secrets
from batch.sweep.cases import unique_specs
from batch.sweep.declare import Typed, mapping_of, ref
from batch.sweep.features.between_models import SideCommand, model_between_models_key, probe_key
from batch.sweep.features.policies import (
    AdaptiveSpec,
    adaptive_key,
    aimd_config,
    breaker_key,
    budget_key,
)
from batch.sweep.features.pools import pool_name
from batch.sweep.features.stop_when import MODEL_STOP_WHEN_SCHEMA, model_stop_when_key
from batch.sweep.features.worker import WorkerSpec, worker_key
from batch.sweep.nodes import (
    Node,
    as_integer,
    as_name,
    checked,
    is_number,
    string_keyed,
)


@attrs.frozen
class ModelSpec:
    id: str
    max_concurrent: int | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: ``env`` as written, before ``${VAR}`` expansion (what the snapshot records).
    env_templates: Mapping[str, str] = attrs.field(factory=dict)
    #: The ``between_models`` keys this model overrides
    #: (batch.sweep.features.between_models.resolve_between_models).
    between_models: Mapping[str, Any] | None = None
    probe: SideCommand | None = None
    #: The breaker fields this model overrides (batch.sweep.features.policies.resolve_breaker).
    breaker: Mapping[str, Any] | None = None
    #: ``adaptive``: AIMD concurrency under ``max_concurrent`` (docs/policies.md); None: off.
    adaptive: AdaptiveSpec | None = None
    #: ``max_attempts`` of this model's jobs; None: the sweep's.
    max_attempts: int | None = None
    #: ``repeats``: samples of each case for this model; None: the sweep's.
    repeats: int | None = None
    #: ``budget``: what this model's jobs may spend (docs/policies.md, "Budgets"); None: no
    #: limit of its own.
    budget: Budget | None = None
    #: ``worker``: the warm worker serving this model's jobs (docs/worker.md); None: the
    #: sweep's ``worker`` or ``command``.
    worker: WorkerSpec | None = None
    #: ``pool``: the pool this model's jobs count against (docs/policies.md, "Pools");
    #: None: the sweep's ``pool``.
    pool: str | None = None
    #: ``stop_when``: this model's ``half_width``/``confidence`` over the sweep's, or
    #: ``"off"`` (docs/sweep-file.md, "stop_when"); None: the sweep's.
    stop_when: Mapping[str, float] | str | None = None

    def aimd(self, sweep_max_concurrent: int) -> AimdConfig | None:
        """The model's AIMD config, its ceiling its own ``max_concurrent`` or the sweep's."""
        if self.adaptive is None:
            return None
        return aimd_config(self.adaptive, self.max_concurrent or sweep_max_concurrent)


def env_key(node: Node) -> tuple[dict[str, str], dict[str, str]]:
    """(expanded values, values as written); ``${VAR}`` comes from the driver's environment."""
    values: dict[str, str] = {}
    templates: dict[str, str] = {}
    for key, value in string_keyed(node):
        if "=" in key.value or "\0" in key.value:
            raise key.error(f"{node.label}: {key.value!r} is not a valid variable name")
        if isinstance(value.value, str):
            template = value.value
        elif is_number(value.value) or isinstance(value.value, bool):
            template = value.source_text()
        else:
            raise value.type_error('a string (write "" for an empty value)')
        secret = secrets.is_secret_name(key.value)
        try:
            values[key.value] = secrets.expand_references(
                template, value.doc.environ, secret=secret
            )
        except ValueError as exc:
            raise value.error(f"{value.label}: {exc}") from None
        templates[key.value] = template
    return values, templates


# --- models ----------------------------------------------------------------------------------


def models_key(node: Node) -> tuple[ModelSpec, ...]:
    return unique_specs(node, _model, "model", "a list of model ids or objects")


def _model(node: Node) -> ModelSpec:
    if not isinstance(node.value, Mapping):
        return ModelSpec(id=as_name(node, "model id"))
    keys = mapping_of(node, _MODEL_OBJECT)
    env, templates = env_key(keys["env"]) if "env" in keys else ({}, {})
    limit = _optional_limit(keys["max_concurrent"]) if "max_concurrent" in keys else None
    between = keys.get("between_models")
    return ModelSpec(
        id=as_name(keys["id"], "model id"),
        max_concurrent=limit,
        env=env,
        env_templates=templates,
        between_models=None if between is None else model_between_models_key(between),
        probe=probe_key(keys["probe"]) if "probe" in keys else None,
        breaker=breaker_key(keys["breaker"]) if "breaker" in keys else None,
        adaptive=_adaptive(keys["adaptive"], limit) if "adaptive" in keys else None,
        max_attempts=as_integer(1)(keys["max_attempts"]) if "max_attempts" in keys else None,
        budget=budget_key(keys["budget"]) if "budget" in keys else None,
        repeats=as_repeats(keys["repeats"]) if "repeats" in keys else None,
        worker=worker_key(keys["worker"]) if "worker" in keys else None,
        pool=pool_name(keys["pool"]) if "pool" in keys else None,
        stop_when=model_stop_when_key(keys["stop_when"]) if "stop_when" in keys else None,
    )


#: The most samples of one case a sweep may ask for: past it, a typo, not an evaluation.
MAX_REPEATS = 10_000


def as_repeats(node: Node) -> int:
    """``repeats``: a whole number from 1 to :data:`MAX_REPEATS`."""
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_REPEATS:
        # A number of 400 digits is not worth printing whole.
        got = f"{value:,}" if value.bit_length() <= 64 else "a larger number"
        raise node.error(f"{node.label}: must be at most {MAX_REPEATS:,}, got {got}")
    return as_integer(1)(node)


def _adaptive(node: Node, max_concurrent: int | None) -> AdaptiveSpec | None:
    """``adaptive``; an ``initial`` above the model's own ``max_concurrent`` is refused here
    (one above the sweep's is cut to it when the sweep runs, as ``-j`` may lower it)."""
    spec = adaptive_key(node)
    if spec is not None and spec.initial is not None and max_concurrent is not None:
        checked(node, lambda _: aimd_config(spec, max_concurrent))
    return spec


def _optional_limit(node: Node) -> int | None:
    return None if node.value is None else as_integer(1)(node)


#: ``models`` and ``env``: their values (the converters') and their schemas.
MODELS = Typed(models_key, {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/model"}})
ENV = Typed(env_key, ref("env"))

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "env": {
        "description": "Environment variables: name → string; ${VAR} takes the driver's.",
        "type": "object",
        "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "additionalProperties": {"type": ["string", "number", "boolean"]},
    },
    "model": {
        "description": "A model: an id, or an object with its own limits and overrides.",
        "anyOf": [
            {"$ref": "#/$defs/name"},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["id"],
                "properties": {
                    "id": {
                        "$ref": "#/$defs/name",
                        "description": "the model's name, {model} in the command",
                    },
                    "max_concurrent": {
                        "description": (
                            "this model's jobs running at once; null: only the sweep's limit"
                        ),
                        "anyOf": [
                            {"type": "integer", "minimum": 1},
                            {"type": "null"},
                        ],
                        "default": None,
                    },
                    "env": {
                        "$ref": "#/$defs/env",
                        "description": "added to this model's jobs, over the sweep's env",
                    },
                    "between_models": {
                        "description": (
                            "this model's overrides of the sweep's between_models keys"
                        ),
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "reset": {
                                "description": "this model's reset command",
                                "anyOf": [
                                    {"$ref": "#/$defs/side_command"},
                                    {"type": "null"},
                                ],
                            },
                            "settle": {"$ref": "#/$defs/settle"},
                            "cooldown": {
                                "description": "this model's cooldown",
                                "$ref": "#/$defs/duration",
                            },
                        },
                    },
                    "probe": {
                        "$ref": "#/$defs/side_command",
                        "description": "this model's probe for batch check",
                    },
                    "breaker": {
                        "$ref": "#/$defs/breaker",
                        "description": "this model's overrides of the sweep's breaker",
                    },
                    "adaptive": {
                        "description": (
                            "adaptive concurrency: a rate-limited finish halves"
                            " the model's concurrency, a run of others raises "
                            "it"
                        ),
                        "anyOf": [
                            {"type": "boolean"},
                            {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "raise_after": {
                                        "description": (
                                            "finishes without a rate limit before it raises by one"
                                        ),
                                        "type": "integer",
                                        "minimum": 1,
                                    },
                                    "initial": {
                                        "description": "the concurrency it starts at",
                                        "type": "integer",
                                        "minimum": 1,
                                    },
                                },
                            },
                        ],
                        "default": False,
                    },
                    "max_attempts": {
                        "description": "this model's attempt budget",
                        "type": "integer",
                        "minimum": 1,
                        "default": 3,
                    },
                    "budget": {
                        "$ref": "#/$defs/budget",
                        "description": "what this model's jobs may spend",
                    },
                    "repeats": {
                        "description": (
                            "this model's samples of each case; default the sweep's repeats"
                        ),
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 10000,
                    },
                    "worker": {
                        "$ref": "#/$defs/worker",
                        "description": (
                            "the warm worker serving this model's jobs, in "
                            "place of the sweep's command or worker"
                        ),
                    },
                    "pool": {
                        "$ref": "#/$defs/name",
                        "description": (
                            "the pool this model's jobs count against (declared in pools); "
                            "default the sweep's pool"
                        ),
                    },
                    "stop_when": {
                        "description": (
                            "with the sweep's stop_when: {half_width}: this model's own "
                            "half_width or confidence, or off: it runs every case"
                        ),
                        **MODEL_STOP_WHEN_SCHEMA,
                    },
                },
            },
        ],
    },
}
#: A model written as an object: the keys its converter (``_model``) takes.
_MODEL_OBJECT = SCHEMA_DEFS["model"]["anyOf"][1]
