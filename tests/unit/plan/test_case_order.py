"""stop_when's random case order: from the seed alone, the same for every model, stable
when cases come and go, a case's repeats together; the seed kept in the batch."""

from __future__ import annotations

import json
from pathlib import Path

from batch.plan.case_order import read_seed, resolve_seed, shuffled, write_seed
from batch.plan.matrix import build_jobs
from batch.sweep.load import load_sweep

CASES = [f"c{i:03d}" for i in range(200)]


def test_the_order_is_the_seeds_and_not_the_files() -> None:
    first = shuffled(CASES, 1, str)
    assert first == shuffled(list(reversed(CASES)), 1, str)  # the file's order does not matter
    assert sorted(first) == CASES and first != CASES
    assert shuffled(CASES, 2, str) != first


def test_a_case_added_or_removed_keeps_every_other_cases_place() -> None:
    order = shuffled(CASES, 5, str)
    grown = shuffled([*CASES, "new"], 5, str)
    assert [case for case in grown if case != "new"] == order
    assert shuffled(CASES[1:], 5, str) == [case for case in order if case != CASES[0]]


def test_every_model_runs_the_same_order_and_a_cases_repeats_together(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    sweep = {"cases": CASES[:20], "models": ["a", "b"], "command": ["x"], "repeats": 2}
    path.write_text(json.dumps({**sweep, "stop_when": {"half_width": "5pp", "seed": 9}}))
    jobs = build_jobs(load_sweep(path))
    order = shuffled(CASES[:20], 9, str)
    assert [(j.case, j.repeat, j.model) for j in jobs] == [
        (case, r, model) for case in order for r in (1, 2) for model in ("a", "b")
    ]
    path.write_text(json.dumps(sweep))  # without stop_when: the file's order, as always
    plain = [(j.case, j.repeat, j.model) for j in build_jobs(load_sweep(path))]
    assert plain[:4] == [
        (CASES[0], 1, "a"),
        (CASES[0], 1, "b"),
        (CASES[1], 1, "a"),
        (CASES[1], 1, "b"),
    ]


def test_the_seed_is_drawn_once_and_kept_in_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps({"cases": ["a"], "models": ["m"], "command": ["x"],
                                "stop_when": {"half_width": "5pp"}}))  # fmt: skip
    sweep = load_sweep(path)
    new = resolve_seed(sweep, None)
    assert new.drawn and new.sweep.stop_when is not None and new.sweep.stop_when.seed is not None
    batch = tmp_path / "batch"
    batch.mkdir()
    assert read_seed(batch) is None
    write_seed(batch, new.sweep.stop_when.seed)
    resumed = resolve_seed(sweep, batch)
    assert not resumed.drawn and resumed.sweep.stop_when == new.sweep.stop_when
    (batch / "batch-logs" / "case-order.json").write_text("not json")
    assert read_seed(batch) is None  # unreadable: a new one is drawn, nothing crashes
