"""The pool keys (``pools``, ``pool``, ``pools_store``): what they read to, where a mistake is
reported, and the snapshot that reads back to the same sweep."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from batch.errors import SweepError
from batch.pools.config import PoolConfig
from batch.sweep.load import Sweep, load_sweep
from batch.sweep.snapshot import snapshot_data, snapshot_text

BASE = "cases: [c1]\ncommand: [x]\n"


def _load(tmp_path: Path, text: str) -> Sweep:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + text, encoding="utf-8")
    return load_sweep(path)


@pytest.mark.parametrize(
    ("written", "per_second"),
    [
        ("6/s", 6.0),
        ("30/min", 0.5),
        ("0.5", 0.5),
        ("2", 2.0),
        ("90 / hour", 0.025),
        ("1.5e1/sec", 15.0),
    ],
)
def test_a_rate_is_starts_a_second(tmp_path: Path, written: str, per_second: float) -> None:
    sweep = _load(tmp_path, f"models: [m]\npools: {{k: {{rate: {written}}}}}\npool: k\n")
    (config,) = sweep.pools.values()
    assert config.rate is not None and math.isclose(config.rate, per_second)
    assert sweep.pool_of("m") == "k"


def test_a_models_pool_overrides_the_sweeps(tmp_path: Path) -> None:
    sweep = _load(
        tmp_path,
        "models: [a, {id: b, pool: other}]\npool: main\n"
        "pools: {main: {max_concurrent: 2}, other: {rate: 1, adaptive: true}}\n",
    )
    assert (sweep.pool_of("a"), sweep.pool_of("b")) == ("main", "other")
    assert sweep.pools["other"] == PoolConfig(None, 1.0, True)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("models: [m]\npools: {k: {rate: 0}}\n", "4:19", "pools.k.rate: must be a positive rate"),
        ("models: [m]\npools: {k: {rate: -.inf}}\n", "4:19", "pools.k.rate: must be a positive"),
        ("models: [m]\npools: {k: {rate: .nan}}\n", "4:19", "pools.k.rate: must be a positive"),
        ("models: [m]\npools: {k: {adaptive: true}}\n", "4:12", "pools.k: names no limit"),
        ("models: [m]\npools: {k: {max_concurrent: 0}}\n", "4:29", "pools.k.max_concurrent"),
        ("models: [m]\npools: {k: {rate: 1}}\npool: q\n", "5:7", "pool: no pool 'q' in pools"),
        ("models: [{id: m, pool: q}]\n", "3:24", "models[0].pool: no pool 'q' in pools"),
        ("models: [m]\npools_store: http://x\n", "4:14", "pools_store: expected redis://"),
    ],
)
def test_a_mistake_is_reported_where_it_is_written(
    tmp_path: Path, text: str, where: str, message: str
) -> None:
    with pytest.raises(SweepError) as caught:
        _load(tmp_path, text)
    (line,) = caught.value.lines()
    assert line.startswith(f"{tmp_path / 'sweep.yaml'}:{where}: "), line
    assert message in line


def test_the_snapshot_reads_back_to_the_same_pools(tmp_path: Path) -> None:
    sweep = _load(
        tmp_path,
        "models: [a, {id: b, pool: other}]\npool: main\npools_store: redis://h:6379/2\n"
        "pools: {main: {max_concurrent: 2, rate: 30/min}, other: {rate: 1, adaptive: true}}\n",
    )
    again = tmp_path / "again.yaml"
    again.write_text(snapshot_text(snapshot_data(sweep)), encoding="utf-8")
    back = load_sweep(again)
    assert back.pools == sweep.pools
    assert (back.pool, back.pools_store) == ("main", "redis://h:6379/2")
    assert back.pool_of("b") == "other"
