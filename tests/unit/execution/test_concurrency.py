"""Adaptive limits applied: the scheduler's per-model limit, the display and the events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.fake_jobs import make_sweep

from batch.display.plain import PlainDisplay
from batch.execution.concurrency import AdaptiveLimits, aimd_configs
from batch.sweep.features.policies import AdaptiveSpec
from batch.sweep.load import ModelSpec


class Recorder(PlainDisplay):
    def __init__(self) -> None:
        self.limits: list[tuple[str, int, int]] = []

    def model_limit(self, model: str, current: int, maximum: int) -> None:
        self.limits.append((model, current, maximum))


def models(*specs: ModelSpec) -> tuple[ModelSpec, ...]:
    return specs


def test_the_ceiling_is_the_models_limit_within_the_sweeps(tmp_path: Path) -> None:
    sweep = make_sweep(
        tmp_path,
        ["true"],
        models=models(
            ModelSpec("own", max_concurrent=3, adaptive=AdaptiveSpec()),
            ModelSpec("above", max_concurrent=16, adaptive=AdaptiveSpec(initial=12)),
            ModelSpec("sweeps", adaptive=AdaptiveSpec()),
            ModelSpec("static", max_concurrent=2),
        ),
        max_concurrent=6,
    )
    configs = aimd_configs(sweep)
    assert {model: config.max_concurrent for model, config in configs.items()} == {
        "own": 3,
        "above": 6,
        "sweeps": 6,
    }
    assert configs["above"].initial == 6  # cut to the ceiling, as -j may lower it


def test_a_change_reaches_the_scheduler_the_display_and_the_events(tmp_path: Path) -> None:
    sweep = make_sweep(
        tmp_path,
        ["true"],
        models=models(ModelSpec("m", max_concurrent=4, adaptive=AdaptiveSpec()), ModelSpec("s")),
    )
    limits: dict[str, int | None] = {"m": 4, "s": None}
    display, emitted = Recorder(), []

    def emit(event: str, **fields: Any) -> None:
        emitted.append({"event": event, **fields})

    adaptive = AdaptiveLimits(sweep, limits, display, emit)
    adaptive.begin()
    adaptive.record("m", "error", "api_or_credit", started=0.0, now=1.0)
    adaptive.record("m", "error", "api_or_credit", started=0.5, now=1.2)  # same burst
    adaptive.record("s", "error", "api_or_credit", started=0.0, now=1.0)  # not adaptive

    assert limits == {"m": 2, "s": None}
    assert display.limits == [("m", 4, 4), ("m", 2, 4)]
    assert emitted == [
        {
            "event": "concurrency",
            "model": "m",
            "current": 2,
            "max": 4,
            "old": 4,
            "reason": "api_or_credit: halved",
        }
    ]
