"""The sweep file: what to run (cases × models × command) and how (limits, timeouts, retries).

``load_sweep(path)`` reads the YAML with ruamel.yaml, validates every key at load time and
returns a frozen :class:`Sweep`; any problem is a :class:`SweepError` located as
``sweep.yaml:LINE:COL: message``. Documented key by key in ``docs/sweep-file.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from run_support.results import NON_MODEL_FAILURE_CATEGORIES

#: Placeholders a command may use besides ``{params.NAME}``.
PLACEHOLDERS = ("case", "model", "model_safe", "run_dir", "batch_dir", "attempt")
ORDERS = ("interleave", "model-major")
DEFAULT_LOG_PATTERNS: Mapping[str, tuple[str, ...]] = {
    "api_or_credit": ("429", "rate limit", "insufficient credit"),
}


@attrs.frozen
class CaseSpec:
    id: str
    timeout: float | None = None
    params: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ModelSpec:
    id: str
    max_concurrent: int | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Sweep:
    path: Path
    cases: tuple[CaseSpec, ...]
    models: tuple[ModelSpec, ...]
    command: tuple[str, ...]
    output: Path
    name: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    timeout: float | None = None
    kill_grace: float = 10.0
    max_concurrent: int = 4
    stagger: float = 0.0
    order: str = "interleave"
    retries: int = 0
    retry_backoff: float = 30.0
    non_model_categories: frozenset[str] = NON_MODEL_FAILURE_CATEGORIES
    log_patterns: Mapping[str, tuple[str, ...]] = attrs.field(
        factory=lambda: dict(DEFAULT_LOG_PATTERNS)
    )
    summary_interval: float = 2.0

    def model(self, model_id: str) -> ModelSpec:
        for spec in self.models:
            if spec.id == model_id:
                return spec
        raise KeyError(model_id)


class SweepError(Exception):
    """A sweep file problem, already formatted as ``FILE:LINE:COL: message``."""
