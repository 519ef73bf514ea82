"""The stop_when key: shares as written, every mistake located, the snapshot read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from batch.errors import SweepError
from batch.sweep.features.stop_when import StopWhen, model_rule
from batch.sweep.load import load_sweep
from batch.sweep.snapshot import snapshot_data, sweep_snapshot


def _load(tmp_path: Path, rule: Any, models: list[Any] | None = None) -> Any:
    path = tmp_path / "sweep.yaml"
    sweep = {"cases": ["a", "b"], "models": models or ["m", "n"], "command": ["x"]}
    path.write_text(json.dumps({**sweep, "stop_when": rule}), encoding="utf-8")
    return load_sweep(path)


@pytest.mark.parametrize("written", ["3pp", "3%", 0.03, " 3 pp ", "3e0pp"])
def test_a_share_is_points_a_percent_or_a_fraction(tmp_path: Path, written: object) -> None:
    assert _load(tmp_path, {"half_width": written}).stop_when.half_width == pytest.approx(0.03)


def test_the_defaults(tmp_path: Path) -> None:
    rule = _load(tmp_path, {"compare": ["m", "n"]}).stop_when
    assert rule == StopWhen(compare=("m", "n"), margin=0.0, confidence=0.95, seed=None)
    assert _load(tmp_path, None).stop_when is None


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({}, "give half_width or compare"),
        ({"half_width": "3pp", "compare": ["m", "n"]}, "give half_width or compare"),
        ({"half_width": 0}, "must be more than 0"),
        ({"half_width": 1}, "must be below 1"),
        ({"half_width": "3 points"}, "must be a share such as 3pp"),
        ({"half_width": "3pp", "margin": "1pp"}, "goes with compare"),
        ({"half_width": "3pp", "seed": -1}, "must be 0 to"),
        ({"half_width": "3pp", "seed": 1.5}, "an integer"),
        ({"half_width": "3pp", "confidence": 0.4}, "at least 0.5"),
        ({"compare": ["m"]}, "a list of two model ids"),
        ({"compare": ["m", "m"]}, "with itself"),
        ("3pp", "a mapping"),
    ],
)
def test_every_mistake_is_located(tmp_path: Path, rule: Any, message: str) -> None:
    with pytest.raises(SweepError) as caught:
        _load(tmp_path, rule)
    (line,) = caught.value.lines()
    assert line.startswith(f"{tmp_path / 'sweep.yaml'}:1:") and message in line, line


def test_a_models_own_rule_needs_the_sweeps_half_width(tmp_path: Path) -> None:
    models = ["m", {"id": "n", "stop_when": {"half_width": "5pp"}}]
    with pytest.raises(SweepError, match=r"models\[1\]\.stop_when: needs the sweep's"):
        _load(tmp_path, {"compare": ["m", "n"]}, models)
    with pytest.raises(SweepError, match="needs the sweep's"):
        _load(tmp_path, None, models)


def test_a_models_rule_is_the_sweeps_with_its_own_fields_over_it(tmp_path: Path) -> None:
    models = ["m", {"id": "n", "stop_when": {"half_width": "5pp"}}, {"id": "o", "stop_when": "off"}]
    sweep = _load(tmp_path, {"half_width": "3pp", "confidence": 0.9}, models)
    rules = [model_rule(sweep.stop_when, m.stop_when) for m in sweep.models]
    assert rules[0] == sweep.stop_when
    assert rules[1] == StopWhen(half_width=0.05, confidence=0.9)
    assert rules[2] is None


def test_the_snapshot_reads_back_as_the_same_sweep(tmp_path: Path) -> None:
    models = ["m", {"id": "n", "stop_when": {"confidence": "99%"}}]
    sweep = _load(tmp_path, {"half_width": "3pp", "seed": 7}, models)
    path = tmp_path / "snapshot.yaml"
    path.write_text(sweep_snapshot(sweep), encoding="utf-8")
    again = load_sweep(path)
    assert again.stop_when == sweep.stop_when
    assert [m.stop_when for m in again.models] == [None, {"confidence": 0.99}]
    assert snapshot_data(again)["stop_when"] == {"half_width": 0.03, "confidence": 0.95, "seed": 7}
