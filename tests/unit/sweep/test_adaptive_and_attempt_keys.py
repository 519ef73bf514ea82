"""The sweep keys of adaptive concurrency and the attempt budget: read, checked, snapshotted."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from ruamel.yaml import YAML

from batch.errors import SweepError
from batch.policies.aimd import AimdConfig
from batch.policies.spend import Budget
from batch.sweep.features.policies import AdaptiveSpec
from batch.sweep.load import Sweep, load_sweep
from batch.sweep.snapshot import sweep_snapshot

BASE = 'cases: [c01]\ncommand: ["true"]\nmax_concurrent: 6\n'


def load(tmp_path: Path, text: str) -> Sweep:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + text, encoding="utf-8")
    return load_sweep(path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(SweepError) as info:
        load(tmp_path, text)
    return str(info.value)


def test_defaults_three_attempts_and_no_adaptive_model(tmp_path: Path) -> None:
    sweep = load(tmp_path, "models: [m]\n")
    assert sweep.max_attempts == 3
    assert (sweep.models[0].adaptive, sweep.models[0].max_attempts) == (None, None)
    data = YAML(typ="safe").load(sweep_snapshot(sweep))
    assert "max_attempts" not in data  # the snapshot of a plain sweep stays as it was
    assert data["models"][0] == {"id": "m", "max_concurrent": None, "env": {}}


def test_keys_are_read_and_round_trip_through_the_snapshot(tmp_path: Path) -> None:
    sweep = load(
        tmp_path,
        "max_attempts: 5\nmodels:\n"
        "  - {id: a, max_concurrent: 8, adaptive: true, max_attempts: 2}\n"
        "  - {id: b, adaptive: {raise_after: 4, initial: 2}}\n"
        "  - {id: c, adaptive: false}\n",
    )
    a, b, c = sweep.models
    assert sweep.max_attempts == 5
    assert (a.adaptive, a.max_attempts) == (AdaptiveSpec(), 2)
    assert a.aimd(sweep.max_concurrent) == AimdConfig(max_concurrent=8)
    assert b.aimd(sweep.max_concurrent) == AimdConfig(max_concurrent=6, raise_after=4, initial=2)
    assert c.adaptive is None
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(sweep_snapshot(sweep))
    assert attrs.evolve(load_sweep(snapshot), path=sweep.path) == sweep


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_attempts: 0\nmodels: [m]\n", "max_attempts: must be at least 1, got 0"),
        ("models: [{id: m, max_attempts: two}]\n", "models[0].max_attempts: expected an integer"),
        ("models: [{id: m, adaptive: sometimes}]\n", "models[0].adaptive: expected true, false"),
        ("models: [{id: m, adaptive: {slow: 1}}]\n", "unknown key 'slow'"),
        (
            "models: [{id: m, max_concurrent: 2, adaptive: {initial: 3}}]\n",
            "adaptive.initial 3 is above the model's max_concurrent 2",
        ),
    ],
)
def test_bad_values_are_located_errors(tmp_path: Path, text: str, message: str) -> None:
    error = error_of(tmp_path, text)
    assert error.startswith(f"{tmp_path / 'sweep.yaml'}:")
    assert message in error


# --- budget --------------------------------------------------------------------------------


def test_budgets_are_read_and_round_trip_through_the_snapshot(tmp_path: Path) -> None:
    sweep = load(
        tmp_path,
        "budget: {cost_usd: 50, tokens: 2_000_000}\n"
        "models: [{id: a, budget: {cost_usd: 12.5}}, b]\n",
    )
    assert sweep.budget == Budget(cost_usd=50.0, tokens=2_000_000)
    assert [m.budget for m in sweep.models] == [Budget(cost_usd=12.5), None]
    data = YAML(typ="safe").load(sweep_snapshot(sweep))
    assert data["budget"] == {"cost_usd": 50.0, "tokens": 2_000_000}
    assert data["models"][0]["budget"] == {"cost_usd": 12.5}
    assert "budget" not in data["models"][1]
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(sweep_snapshot(sweep))
    assert attrs.evolve(load_sweep(snapshot), path=sweep.path) == sweep


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("budget: 50\n", "5:9", "budget: expected a mapping with cost_usd and/or tokens"),
        ("budget: {}\n", "5:9", "budget: names no limit (give cost_usd and/or tokens)"),
        ("budget: {dollars: 5}\n", "5:10", "unknown key 'dollars'"),
        ("budget: {cost_usd: -1}\n", "5:20", "budget.cost_usd: cost_usd must be a number more"),
        ("budget: {tokens: 1.5}\n", "5:18", "budget.tokens: tokens must be a whole number"),
    ],
)
def test_bad_budgets_are_located_at_the_value(
    tmp_path: Path, text: str, where: str, message: str
) -> None:
    error = error_of(tmp_path, "models: [m]\n" + text)
    assert error.startswith(f"{tmp_path / 'sweep.yaml'}:{where}: "), error
    assert message in error
