"""The ``worker`` key (docs/worker.md): sweep-wide in place of ``command``, or per model."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch.errors import SweepError
from batch.sweep.features.worker import WorkerSpec
from batch.sweep.load import Sweep, load_sweep
from batch.sweep.snapshot import sweep_snapshot


def load(tmp_path: Path, text: str) -> Sweep:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return load_sweep(path)


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SweepError) as caught:
        load(tmp_path, text)
    return str(caught.value)


def test_a_sweep_wide_worker_serves_every_model_and_takes_the_place_of_command(
    tmp_path: Path,
) -> None:
    sweep = load(tmp_path, "cases: [a]\nmodels: [m1, m2]\nworker: [python3, w.py, '{batch_dir}']\n")
    assert sweep.command == ()
    assert (
        sweep.worker_for("m1")
        == sweep.worker_for("m2")
        == WorkerSpec(("python3", "w.py", "{batch_dir}"), 1)
    )
    assert sweep.uses_workers


def test_a_models_own_worker_serves_its_jobs_and_the_others_keep_the_command(
    tmp_path: Path,
) -> None:
    sweep = load(
        tmp_path,
        "cases: [a]\ncommand: [run]\n"
        "models: [m1, {id: m2, worker: {command: [w], concurrency: 4}}]\n",
    )
    assert sweep.worker_for("m1") is None
    assert sweep.worker_for("m2") == WorkerSpec(("w",), 4)


def test_without_command_every_model_may_name_its_own_worker(tmp_path: Path) -> None:
    sweep = load(tmp_path, "cases: [a]\nmodels: [{id: m1, worker: [w1]}, {id: m2, worker: [w2]}]\n")
    assert [sweep.worker_for(m) for m in ("m1", "m2")] == [WorkerSpec(("w1",)), WorkerSpec(("w2",))]
    message = error(tmp_path, "cases: [a]\nmodels: [{id: m1, worker: [w1]}, m2]\n")
    assert "missing required key 'command' (or 'steps'" in message


def test_the_snapshot_of_a_worker_sweep_reads_back_as_the_same_sweep(tmp_path: Path) -> None:
    sweep = load(
        tmp_path,
        "cases: [a]\nmodels: [{id: m, worker: [w]}]\nworker: {command: [x], concurrency: 2}\n",
    )
    again = load(tmp_path, sweep_snapshot(sweep))
    assert again.worker == sweep.worker
    assert again.models[0].worker == sweep.models[0].worker


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("worker: [w]\ncommand: [c]\n", "sweep.yaml:3:9: worker: replaces command; give one"),
        (
            "worker: 'python3 w.py'\n",
            "worker: expected an argv list, or {command: [...], concurrency: N}, got a string",
        ),
        ("worker: []\n", "worker: is empty"),
        ("worker: {command: [w], concurrency: 0}\n", "worker.concurrency: must be at least 1"),
        ("worker: {command: [w], slots: 2}\n", "unknown key 'slots'"),
        ("worker: [w, '{case}']\n", "{case} is one job's value and a worker serves many"),
        (
            "worker: [w]\nsteps: [{name: eval, command: [e]}]\n",
            "worker: cannot serve a multi-step job (steps:) yet",
        ),
    ],
)
def test_a_bad_worker_is_a_located_one_line_error(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error(tmp_path, "cases: [a]\nmodels: [m]\n" + text)
