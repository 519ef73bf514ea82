"""The sweep keys of pools (docs/policies.md, "Pools"): one provider key's limit shared by
every sweep that names it.

- ``pools: {NAME: {max_concurrent: 8, rate: 6/s, adaptive: true}}`` →
  ``{NAME: PoolConfig}`` (:func:`pools_key`);
- ``pool: NAME`` on the sweep (every model) or on a model (its own) → the name
  (:func:`pool_name`); a name ``pools`` does not declare is an error where it is written
  (:func:`check_pool_names`, a check across keys);
- ``pools_store: redis://HOST:PORT/DB`` (or a directory) → where the drivers share the
  pools' state; unset: the user's state dir on this machine (:func:`pools_store_key`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from batch.pools.config import PoolConfig
from batch.sweep.declare import Typed, ref
from batch.sweep.nodes import Node, as_integer, as_name, as_string, mapping_keys, string_keyed

_RATE = re.compile(
    r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*"
)
_PER = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0}
_PER |= {"h": 3600.0, "hour": 3600.0}
_RATE_HINT = "a positive rate of starts, e.g. 6/s, 30/min or 0.5 (a second)"


def _rate(node: Node) -> float:
    value = node.value
    if isinstance(value, bool):
        raise node.type_error(_RATE_HINT)
    if isinstance(value, int | float):
        rate = float(value)
    elif isinstance(value, str) and (match := _RATE.fullmatch(value)):
        rate = float(match.group(1)) / _PER[match.group(2) or "s"]
    else:
        raise node.error(f"{node.label}: expected {_RATE_HINT}, got {value!r}")
    if not math.isfinite(rate) or rate <= 0:
        raise node.error(f"{node.label}: must be {_RATE_HINT}, got {value!r}")
    return rate


def _pool(node: Node) -> PoolConfig:
    keys = mapping_keys(node, ("max_concurrent", "rate", "adaptive"))
    if "max_concurrent" not in keys and "rate" not in keys:
        raise node.error(f"{node.label}: names no limit (give max_concurrent and/or rate)")
    adaptive = keys.get("adaptive")
    if adaptive is not None and not isinstance(adaptive.value, bool):
        raise adaptive.type_error("true or false")
    return PoolConfig(
        max_concurrent=as_integer(1)(keys["max_concurrent"]) if "max_concurrent" in keys else None,
        rate=_rate(keys["rate"]) if "rate" in keys else None,
        adaptive=bool(adaptive.value) if adaptive is not None else False,
    )


def pools_key(node: Node) -> dict[str, PoolConfig]:
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping of pool names to {max_concurrent, rate, adaptive}")
    return {as_name(key, "pool name"): _pool(value) for key, value in string_keyed(node)}


def pool_name(node: Node) -> str:
    return as_name(node, "pool name")


def pools_store_key(node: Node) -> str | None:
    if node.value is None:
        return None
    value = as_string(node).strip()
    if not value.startswith(("redis://", "rediss://", "unix://", "/", "file:")):
        raise node.error(
            f"{node.label}: expected redis://HOST:PORT/DB or an absolute directory, got {value!r}"
        )
    return value


def check_pool_names(nodes: Mapping[str, Node], fields: Mapping[str, Any]) -> None:
    """Every ``pool`` names one that ``pools`` declares."""
    declared = fields.get("pools") or {}
    known = ", ".join(sorted(declared)) or "none"
    if fields.get("pool") is not None and fields["pool"] not in declared:
        node = nodes["pool"]
        raise node.error(f"{node.label}: no pool {fields['pool']!r} in pools (declared: {known})")
    for model, item in zip(fields["models"], nodes["models"].elements(), strict=True):
        if model.pool is not None and model.pool not in declared:
            where = next((v for k, v in item.entries() if k.value == "pool"), item)
            raise where.error(f"{where.label}: no pool {model.pool!r} in pools (declared: {known})")


def pools_snapshot(pools: Mapping[str, PoolConfig]) -> dict[str, dict[str, Any]]:
    """``pools`` as the value :func:`pools_key` reads back to it."""
    data: dict[str, dict[str, Any]] = {}
    for name, config in pools.items():
        entry: dict[str, Any] = {"adaptive": config.adaptive}
        if config.max_concurrent is not None:
            entry["max_concurrent"] = config.max_concurrent
        if config.rate is not None:
            entry["rate"] = config.rate
        data[name] = entry
    return data


# --- declared once: converter and schema (the key table's rows, batch.sweep.keys) ----------

_RATE_PATTERN = (
    r"^\s*[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?\s*(/\s*(s|sec|second|m|min|minute|h|hour))?\s*$"
)
_POOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "anyOf": [{"required": ["max_concurrent"]}, {"required": ["rate"]}],
    "properties": {
        "max_concurrent": {
            "description": "jobs of every sweep in the pool at once",
            "type": "integer",
            "minimum": 1,
        },
        "rate": {
            "description": "starts a second: 6/s, 30/min, 0.5 (one start every 2 s)",
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": _RATE_PATTERN},
            ],
        },
        "adaptive": {
            "description": (
                "a rate-limited finish any sweep sees lowers the pool's concurrency and rate; "
                "good finishes raise them together"
            ),
            "type": "boolean",
            "default": False,
        },
    },
}
POOLS = Typed(pools_key, {"type": "object", "additionalProperties": _POOL_SCHEMA})
POOL = Typed(pool_name, ref("name"))
POOLS_STORE = Typed(
    pools_store_key,
    {
        "anyOf": [
            {"type": "string", "pattern": "^(redis://|rediss://|unix://|/|file:)"},
            {"type": "null"},
        ]
    },
)
