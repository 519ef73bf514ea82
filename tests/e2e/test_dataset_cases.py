"""``cases: {jsonl: data.jsonl, id: task_id}`` through the real CLI: each row a case, its
scalars as ``{params.NAME}``, the row as the run dir's ``case.json``, located errors for bad
ids, and a dataset changed under a batch reported by ``plan``."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import BatchCli

ROWS = [
    {"task_id": "HumanEval/0", "prompt": "def f():", "n": 3, "tests": ["a", "b"]},
    {"task_id": "HumanEval/1", "prompt": "def g():", "n": 4, "tests": []},
]
#: The job copies its case.json next to a file named by its params, for the test to read.
JOB = (
    "import shutil, sys; "
    "shutil.copy('{run_dir}/case.json', sys.argv[1] + '/' + sys.argv[2] + '.json')"
)


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


def write_sweep(cli: BatchCli, jsonl: str, id_field: str = "task_id") -> Path:
    seen = cli.dir / "seen"
    seen.mkdir(exist_ok=True)
    sweep = {
        "output": str(cli.dir / "runs"),
        "cases": {"jsonl": jsonl, "id": id_field},
        "models": ["m"],
        "command": [sys.executable, "-c", JOB, str(seen), "{params.n}-{model}"],
    }
    path = cli.dir / "exp" / "sweep.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(sweep))
    return path


@pytest.mark.parametrize("name", ["data.jsonl", "data.jsonl.gz"])
def test_each_row_is_a_case_with_its_row_as_case_json(batch_cli: BatchCli, name: str) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, name)
    write_dataset(sweep.parent / name, ROWS)  # relative to the sweep file, not the cwd

    done = cli.run(sweep, "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = cli.summary()["jobs"]
    assert [(row["case"], row["status"]) for row in rows] == [
        ("HumanEval/0", "passed"),
        ("HumanEval/1", "passed"),
    ]
    # {params.n} came from the row; case.json is the row as written.
    for row in ROWS:
        seen = json.loads((cli.dir / "seen" / f"{row['n']}-m.json").read_text())
        assert seen == row
    snapshot = (cli.only_batch_dir() / "sweep.yaml").read_text()
    assert f"jsonl: {sweep.parent / name}" in snapshot
    assert "rows: 2" in snapshot and "fingerprint: sha256:" in snapshot

    again = cli.run("plan", sweep, "--resume", "--format", "json")
    assert again.returncode == 0, again.stderr
    plan = json.loads(again.stdout)
    assert plan["counts"] == {"run": 0, "carry": 2, "retry": 0}
    assert plan["changes"] == []


def test_plan_reports_a_dataset_changed_under_the_batch(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, "data.jsonl")
    write_dataset(sweep.parent / "data.jsonl", ROWS)
    assert cli.run(sweep, "--no-progress").returncode == 0

    write_dataset(sweep.parent / "data.jsonl", [*ROWS, {"task_id": "HumanEval/2", "n": 5}])
    plan = cli.run("plan", sweep, "--resume")
    assert plan.returncode == 0, plan.stderr
    assert "the sweep changed since this batch last ran:" in plan.stdout
    assert "dataset changed: content changed (2 → 3 rows)" in plan.stdout
    assert "1 to run, 0 to retry, 2 carried" in plan.stdout
    assert "  + case HumanEval/2 (1 job)\n" in plan.stdout


def test_a_row_swapped_for_another_names_both_cases(batch_cli: BatchCli) -> None:
    # Same row count: before, only "content changed (2 → 2 rows)", naming neither case.
    cli = batch_cli
    sweep = write_sweep(cli, "data.jsonl")
    write_dataset(sweep.parent / "data.jsonl", ROWS)
    assert cli.run(sweep, "--no-progress").returncode == 0

    write_dataset(sweep.parent / "data.jsonl", [ROWS[0], {"task_id": "new1", "n": 5}])
    plan = cli.run("plan", sweep, "--resume")
    assert plan.returncode == 0, plan.stderr
    changes = plan.stdout.split("the sweep changed since this batch last ran:\n")[1]
    assert changes.splitlines()[:3] == [
        "  + case new1 (1 job)",
        "  - case HumanEval/1: 1 recorded run kept, left out of the summary",
        "  dataset changed: content changed (2 → 2 rows): carried results came from the old rows",
    ]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [ROWS[0], {"prompt": "x"}],
            "exp/data.jsonl:2:1: task_id: missing (every row needs its case id)",
        ),
        (
            [ROWS[0], ROWS[1], ROWS[0]],
            "exp/data.jsonl:3:1: task_id: duplicate case id 'HumanEval/0' (first at line 1)",
        ),
    ],
)
def test_a_bad_id_is_a_located_error(
    batch_cli: BatchCli, rows: list[dict[str, Any]], message: str
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, "data.jsonl")
    write_dataset(sweep.parent / "data.jsonl", rows)
    for args in ((sweep,), ("plan", sweep)):
        done = cli.run(*(str(a).replace(str(cli.dir) + "/", "") for a in args))
        assert done.returncode == 2
        assert message in done.stderr
    assert not (cli.dir / "runs").exists()
