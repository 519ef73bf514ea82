"""The sweep's ``stop_when`` key: stop a model, or a comparison of two, once the answer is
known (docs/sweep-file.md, "stop_when"; the rules are ``batch.stop_when.rules``).

``stop_when: {half_width: 3pp}`` stops each model once the anytime-valid interval of its
adjusted pass rate is at most ±3 pp; ``stop_when: {compare: [A, B], margin: 1pp}`` stops
both once the sign of B - A is known or the difference is known to lie within ±1 pp. Either
takes ``confidence`` (default 0.95) and ``seed``: the seed of the random case order (an
integer; without it the driver draws one when the batch is made and keeps it in the batch).

A share is written ``3pp`` (percentage points), ``3%`` or as a fraction, ``0.03``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from batch.sweep.nodes import MAX_COUNT, Node, as_name, is_number, mapping_keys

__all__ = [
    "DEFAULT_CONFIDENCE",
    "StopWhen",
    "check_compared_models",
    "model_stop_when_key",
    "stop_when_key",
]

DEFAULT_CONFIDENCE = 0.95
_KEYS = ("half_width", "compare", "margin", "confidence", "seed")
_PERCENT = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(pp|%)\s*")
_HINT = "{half_width: 3pp} or {compare: [A, B], margin: 1pp}"


@attrs.frozen
class StopWhen:
    """When a model, or a pair, stops. Exactly one of ``half_width`` and ``compare``."""

    #: Stop each model once its interval is at most ± this (a share, 0.03 for 3 pp).
    half_width: float | None = None
    #: Stop both once B - A (the second minus the first) is known.
    compare: tuple[str, str] | None = None
    #: ...or known to lie within ± this (0: only a known sign stops them).
    margin: float = 0.0
    confidence: float = DEFAULT_CONFIDENCE
    #: The random case order's seed; None until the driver draws the batch's.
    seed: int | None = None

    def models(self, every: Sequence[str]) -> tuple[str, ...]:
        """The models this rule stops: the compared pair, or every model."""
        return self.compare if self.compare is not None else tuple(every)

    def describe(self) -> str:
        """The rule in the words ``plan`` and the closing lines use."""
        if self.half_width is not None:
            return f"±{percent(self.half_width)}"
        assert self.compare is not None
        a, b = self.compare
        within = f", or within ±{percent(self.margin)}" if self.margin else ""
        return f"the sign of {b} - {a} known{within}"


def percent(share: float) -> str:
    """``0.031`` as ``3.1 pp``."""
    return f"{share * 100:.1f} pp"


def stop_when_key(node: Node) -> StopWhen | None:
    """``{half_width}`` or ``{compare, margin}``, each with ``confidence`` and ``seed``;
    null: off."""
    if node.value is None:
        return None
    if not isinstance(node.value, Mapping):
        raise node.type_error(f"a mapping, {_HINT}")
    keys = mapping_keys(node, _KEYS)
    if ("half_width" in keys) == ("compare" in keys):
        raise node.error(f"{node.label}: give half_width or compare (one of them): {_HINT}")
    fields: dict[str, object] = {}
    if "half_width" in keys:
        fields["half_width"] = _share(keys["half_width"], allow_zero=False)
        if "margin" in keys:
            raise keys["margin"].error(f"{keys['margin'].label}: goes with compare, not half_width")
    else:
        fields["compare"] = _pair(keys["compare"])
        if "margin" in keys:
            fields["margin"] = _share(keys["margin"], allow_zero=True)
    if "confidence" in keys:
        fields["confidence"] = _confidence(keys["confidence"])
    if "seed" in keys:
        seed = keys["seed"]
        if not isinstance(seed.value, int) or isinstance(seed.value, bool):
            raise seed.type_error("an integer")
        if not 0 <= seed.value <= MAX_COUNT:
            raise seed.error(f"{seed.label}: must be 0 to {MAX_COUNT}, got {seed.value}")
        fields["seed"] = int(seed.value)
    return StopWhen(**fields)  # type: ignore[arg-type]


def _share(node: Node, *, allow_zero: bool) -> float:
    """``3pp``, ``3%`` or ``0.03``: a finite share in [0, 1) (above 0 unless ``allow_zero``)."""
    value = _number(node)
    if value < 0 or (value == 0 and not allow_zero):
        least = "0 or more" if allow_zero else "more than 0"
        raise node.error(f"{node.label}: must be {least}, got {node.source_text()}")
    if value >= 1:
        raise node.error(
            f"{node.label}: must be below 1 (100 pp); write 3pp, 3% or 0.03 for three "
            f"points, got {node.source_text()}"
        )
    return value


def _number(node: Node) -> float:
    """``3pp``, ``3%`` or ``0.03`` as a finite fraction."""
    value: float
    if is_number(node.value):
        value = float(node.value)
    elif isinstance(node.value, str) and (match := _PERCENT.fullmatch(node.value)):
        value = float(match[1]) / 100
    else:
        raise node.error(
            f"{node.label}: must be a share such as 3pp, 3% or 0.03, got {node.source_text()}"
        )
    if not math.isfinite(value):
        raise node.error(f"{node.label}: must be a finite number, got {node.source_text()}")
    return value


def _pair(node: Node) -> tuple[str, str]:
    if not isinstance(node.value, list) or len(node.value) != 2:
        raise node.type_error("a list of two model ids, [A, B] (B - A is compared)")
    a, b = (as_name(item, "model id") for item in node.elements())
    if a == b:
        raise node.error(f"{node.label}: compares {a!r} with itself; name two models")
    return a, b


#: A share as the schema says it: ``3pp``, ``3%`` or a fraction.
SHARE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        {"type": "string", "pattern": "^\\s*[0-9]*\\.?[0-9]+([eE][-+]?[0-9]+)?\\s*(pp|%)\\s*$"},
    ]
}
_CONFIDENCE_SCHEMA = {"description": "of the interval (default 0.95)", **SHARE_SCHEMA}
_SEED_SCHEMA = {
    "description": "the random case order's seed (default: drawn, kept)",
    "type": "integer",
    "minimum": 0,
    "maximum": MAX_COUNT,
}
#: ``stop_when`` at the top level.
STOP_WHEN_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "null"},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["half_width"],
            "properties": {
                "half_width": {
                    "description": "stop each model once its interval is at most ± this",
                    **SHARE_SCHEMA,
                },
                "confidence": _CONFIDENCE_SCHEMA,
                "seed": _SEED_SCHEMA,
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["compare"],
            "properties": {
                "compare": {
                    "description": "the two models compared, [A, B]: B - A",
                    "type": "array",
                    "items": {"type": ["string", "number"]},
                    "minItems": 2,
                    "maxItems": 2,
                },
                "margin": {
                    "description": "stop also once B - A is known to lie within ± this",
                    **SHARE_SCHEMA,
                },
                "confidence": _CONFIDENCE_SCHEMA,
                "seed": _SEED_SCHEMA,
            },
        },
    ]
}
#: A model's ``stop_when``.
MODEL_STOP_WHEN_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"const": "off"},
        {"const": False},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "half_width": {
                    "description": "stop this model once its interval is at most ± this",
                    **SHARE_SCHEMA,
                },
                "confidence": _CONFIDENCE_SCHEMA,
            },
        },
    ]
}

#: A model's own ``stop_when`` (``off``: the model runs every case).
MODEL_OFF = "off"
_MODEL_KEYS = ("half_width", "confidence")


def model_stop_when_key(node: Node) -> dict[str, float] | str:
    """A model's ``stop_when``: ``{half_width, confidence}`` over the sweep's for this model,
    or ``off`` (the model runs every case, in the same random order)."""
    if node.value is False or (isinstance(node.value, str) and node.value.strip() == MODEL_OFF):
        return MODEL_OFF
    if not isinstance(node.value, Mapping):
        raise node.type_error("off, or a mapping {half_width, confidence}")
    keys = mapping_keys(node, _MODEL_KEYS)
    fields: dict[str, float] = {}
    if "half_width" in keys:
        fields["half_width"] = _share(keys["half_width"], allow_zero=False)
    if "confidence" in keys:
        fields["confidence"] = _confidence(keys["confidence"])
    return fields


def _confidence(node: Node) -> float:
    """``confidence``: at least 0.5 and below 1 (``0.95`` or ``95%``)."""
    confidence = _number(node)
    if not 0.5 <= confidence < 1:
        raise node.error(
            f"{node.label}: must be at least 0.5 and below 1 (e.g. 0.95 or 95%), got "
            f"{node.source_text()}"
        )
    return confidence


def model_rule(rule: StopWhen, own: Mapping[str, float] | str | None) -> StopWhen | None:
    """A model's rule: the sweep's ``half_width`` rule with the model's own fields over it;
    None for a model whose ``stop_when`` is ``off``."""
    if own == MODEL_OFF:
        return None
    if not own or isinstance(own, str):
        return rule
    return attrs.evolve(
        rule,
        half_width=own.get("half_width", rule.half_width),
        confidence=own.get("confidence", rule.confidence),
    )


def check_compared_models(nodes: Mapping[str, Node], fields: Mapping[str, object]) -> None:
    """Both models of ``compare`` are models of the sweep, and a model's own ``stop_when``
    goes with the sweep's ``half_width`` (a check across keys)."""
    rule = fields.get("stop_when")
    models: Sequence[Any] = fields["models"]  # type: ignore[assignment]
    for model, item in zip(models, nodes["models"].elements(), strict=True):
        if model.stop_when is not None and (not isinstance(rule, StopWhen) or rule.compare):
            own = next(value for key, value in item.entries() if key.value == "stop_when")
            raise own.error(
                f"{own.label}: needs the sweep's stop_when: {{half_width: ...}} (a model may "
                "tune or turn off a half_width stop, not make one alone)"
            )
    if not isinstance(rule, StopWhen) or rule.compare is None:
        return
    ids = [model.id for model in models]
    pair = mapping_keys(nodes["stop_when"], _KEYS)["compare"]
    for model, item in zip(rule.compare, pair.elements(), strict=True):
        if model not in ids:
            raise item.error(
                f"{item.label}: {model!r} is not a model of this sweep (models: {', '.join(ids)})"
            )
