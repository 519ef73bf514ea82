"""The job matrix: every (case, model) pair in start order, each job as ``Job(...)`` would
build it by keyword (build_jobs passes every field by position, for speed)."""

from __future__ import annotations

from pathlib import Path

from batch.plan.jobs import Job
from batch.plan.matrix import build_jobs
from batch.sweep.load import load_sweep


def sweep_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(body, encoding="utf-8")
    return path


PLAIN = """\
name: s
cases:
  - c01
  - {id: c02, timeout: 5s, params: {k: v}}
models: [a, b]
timeout: 1m
command: [echo, "{case}"]
"""


def test_jobs_are_the_keyword_built_jobs_cases_outer(tmp_path: Path) -> None:
    jobs = build_jobs(load_sweep(sweep_file(tmp_path, PLAIN)))
    assert jobs == [
        Job(case="c01", model="a", timeout=60.0),
        Job(case="c01", model="b", timeout=60.0),
        Job(case="c02", model="a", params={"k": "v"}, timeout=5.0),
        Job(case="c02", model="b", params={"k": "v"}, timeout=5.0),
    ]


def test_the_jobs_of_a_case_share_its_params_and_get_the_reason_given(tmp_path: Path) -> None:
    # One dict per case, not per job: a million jobs hold no million copies (nothing writes
    # to a job's params; docs/design.md, "What the driver holds per job").
    sweep = load_sweep(sweep_file(tmp_path, PLAIN))
    jobs = build_jobs(sweep, "new batch dir")
    assert [job.decision_reason for job in jobs] == ["new batch dir"] * 4
    assert jobs[2].params is jobs[3].params is sweep.cases[1].params
    assert jobs[2].params == {"k": "v"}


def test_model_major_dataset_jobs_carry_their_rows(tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").write_bytes(b'{"task_id": "t1", "x": 1}\n{"task_id": "t2"}\n')
    sweep = sweep_file(
        tmp_path,
        "name: d\ncases: {jsonl: data.jsonl, id: task_id}\nmodels: [a, b]\n"
        'order: model-major\ncommand: [echo, "{case}"]\n',
    )
    row1, row2 = b'{"task_id": "t1", "x": 1}', b'{"task_id": "t2"}'
    params1, params2 = {"task_id": "t1", "x": 1}, {"task_id": "t2"}
    assert build_jobs(load_sweep(sweep)) == [
        Job(case="t1", model="a", params=params1, case_row=row1),
        Job(case="t2", model="a", params=params2, case_row=row2),
        Job(case="t1", model="b", params=params1, case_row=row1),
        Job(case="t2", model="b", params=params2, case_row=row2),
    ]
