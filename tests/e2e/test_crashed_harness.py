"""A crashed harness does not pass for a model's failure (docs/policies.md, docs/ledger.md).

A Python harness that dies with an uncaught exception exits 1, "the model failed". When
the first finished attempts all fail with one reason across several models, the sweep is
halted as a broken setup, naming the reason; when failures are not all alike, the closing
lines and ``batch stats`` warn of a model whose failures mostly share one reason; and the
``exit_codes`` sweep key maps a harness's own exit codes to outcomes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.fake_jobs import write_job_script
from helpers.paths import REPO_ROOT

#: A harness that cannot load its task for any model but ``mock/fine``, and says so in a
#: traceback (the last line the reason quotes is the same for every job).
HARNESS = """
import os, sys
if os.environ["BATCH_MODEL"] == "mock/fine":
    sys.exit(0)
if os.environ["BATCH_MODEL"] == "mock/own-code" and os.environ["BATCH_CASE"] == "c4":
    raise AssertionError("the model's answer for c4 is wrong")
code = int(os.environ.get("HARNESS_EXIT", "0"))
if code:
    sys.exit(code)
raise RuntimeError("inspect refused task path 'tasks/eval.py'")
"""


def batch(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path, **env},
        timeout=120,
    )


def write_sweep(directory: Path, models: list[str], extra: str = "") -> None:
    harness = write_job_script(directory, HARNESS, name="harness.py")
    (directory / "sweep.yaml").write_text(
        f"name: crash\ncases: [c1, c2, c3, c4]\nmodels: {json.dumps(models)}\n"
        f"command: [{json.dumps(str(harness))}]\nmax_concurrent: 4\n{extra}"
    )


def only_batch_dir(directory: Path) -> Path:
    (found,) = (directory / "runs").iterdir()
    return found


def test_a_harness_crashing_alike_for_every_model_halts_as_a_broken_setup(tmp_path: Path) -> None:
    write_sweep(tmp_path, ["mock/a", "mock/b", "mock/c"])

    done = batch("sweep.yaml", "--no-progress", cwd=tmp_path)

    # Was: 12 jobs failed / model_failure, 0 % for every model, exit 0 "complete".
    assert done.returncode == 4, done.stdout + done.stderr
    summary = json.loads((only_batch_dir(tmp_path) / "batch-summary.json").read_text())
    assert summary["state"] == "halted"
    message = summary["halt"]["message"]
    assert message.startswith("first 8 jobs all failed with the same reason across 3 models")
    assert "RuntimeError: inspect refused task path 'tasks/eval.py'" in message
    assert f"Halted: {message}" in done.stdout


def test_most_failures_sharing_one_reason_are_warned_of_in_the_closing_lines_and_stats(
    tmp_path: Path,
) -> None:
    # Passes among the first finishes: no halt; but mock/own-code fails 4 of 4, 3 alike.
    write_sweep(tmp_path, ["mock/fine", "mock/own-code"])

    done = batch("sweep.yaml", "--no-progress", cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    warning = (
        "warning: mock/own-code: 3 of 4 failures share one reason (exit code 1: RuntimeError: "
        "inspect refused task path 'tasks/eval.py'): a crashed harness, not the model?"
    )
    assert warning in done.stdout
    assert "mock/fine:" not in done.stdout.split("Summary:")[-1]
    batch_dir = str(only_batch_dir(tmp_path))
    table = batch("stats", batch_dir, "--wide", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert warning in " ".join(table.stdout.split()), table.stdout
    as_json = json.loads(batch("stats", batch_dir, "--format", "json", cwd=tmp_path).stdout)
    assert [line for line in as_json["warnings"] if line.startswith(warning)] != []


def test_exit_codes_map_a_harness_convention_to_outcomes(tmp_path: Path) -> None:
    write_sweep(tmp_path, ["mock/a"], "exit_codes: {1: error, 2: failed}\nhalt: off\n")

    crashed = batch("sweep.yaml", "--no-progress", cwd=tmp_path, HARNESS_EXIT="1")

    assert crashed.returncode == 1, crashed.stdout + crashed.stderr
    records = [json.loads(p.read_text()) for p in tmp_path.glob("runs/*/*/*/run-meta.json")]
    assert {(r["outcome"], r["failure_category"], r["exit_code"]) for r in records} == {
        ("error", "infra_failure", 1)
    }
    # An error is the harness's: --retry-failed offers it, and exit 2 is the model's.
    plan = batch("plan", "sweep.yaml", "--retry-failed", "--format", "json", cwd=tmp_path)
    assert json.loads(plan.stdout)["counts"]["retry"] == 4, plan.stdout + plan.stderr
    failed = batch("sweep.yaml", "--retry-failed", "--no-progress", cwd=tmp_path, HARNESS_EXIT="2")
    assert failed.returncode == 0, failed.stdout + failed.stderr
    summary = json.loads((only_batch_dir(tmp_path) / "batch-summary.json").read_text())
    assert {(row["status"], row["failure_category"]) for row in summary["jobs"]} == {
        ("failed", "model_failure")
    }
    snapshot = (only_batch_dir(tmp_path) / "sweep.yaml").read_text()
    assert "exit_codes:" in snapshot


@pytest.mark.parametrize(
    "declared", ["", "exit_codes: {1: failed}\n"], ids=["convention", "declared"]
)
def test_failures_that_share_only_a_bare_exit_code_are_not_warned_of(
    tmp_path: Path, declared: str
) -> None:
    # The README's convention: exit 1 is the model's failure, and nothing else is said.
    write_sweep(tmp_path, ["mock/fine", "mock/a"], declared)

    done = batch("sweep.yaml", "--no-progress", cwd=tmp_path, HARNESS_EXIT="1")

    # Was: "warning: mock/a: 4 of 4 failures share one reason (exit code 1): a crashed
    # harness, not the model?", in the closing lines and in batch stats.
    assert done.returncode == 0, done.stdout + done.stderr
    assert "share one reason" not in done.stdout
    summary = json.loads((only_batch_dir(tmp_path) / "batch-summary.json").read_text())
    assert summary["totals"]["failed"] == 4
    assert {row.get("reason") for row in summary["jobs"]} == {None, "exit code 1"}
    batch_dir = str(only_batch_dir(tmp_path))
    table = batch("stats", batch_dir, "--wide", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "share one reason" not in table.stdout
    as_json = json.loads(batch("stats", batch_dir, "--format", "json", cwd=tmp_path).stdout)
    assert as_json.get("warnings", []) == []


def test_first_jobs_failing_with_only_a_bare_exit_code_do_not_halt(tmp_path: Path) -> None:
    write_sweep(tmp_path, ["mock/a", "mock/b"])

    done = batch("sweep.yaml", "--no-progress", cwd=tmp_path, HARNESS_EXIT="1")

    # Was: halted as a broken setup ("first 8 jobs all failed with the same reason across
    # 2 models (exit code 1)"): the models failed, as the convention says.
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Halted" not in done.stdout
    summary = json.loads((only_batch_dir(tmp_path) / "batch-summary.json").read_text())
    assert summary["state"] == "complete"
    assert summary["totals"]["failed"] == 8
