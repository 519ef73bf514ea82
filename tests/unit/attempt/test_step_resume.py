"""Step-level resume, end to end: a retry starts from the step that failed and reuses the ones
before (the pure decisions: tests/unit/plan/test_resume_steps.py)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_jobs import wait_until, write_job_script
from helpers.paths import REPO_ROOT

from batch.commands.check import check_main
from batch.commands.run import run_main
from batch.plan.planner import RunOptions

# --- end to end ------------------------------------------------------------------------------

EVAL_SCRIPT = """\
import pathlib, sys
case, run_dir, trace = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
open(trace, "a").write("eval\\n")
print("eval output for", case, flush=True)
(run_dir / "predictions").mkdir()
(run_dir / "predictions" / "p.txt").write_text("answer for " + case)
"""

JUDGE_SCRIPT = """\
import json, os, pathlib, sys
run_dir, trace, flag = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
open(trace, "a").write("judge\\n")
if not os.path.exists(flag):
    open(flag, "w").close()
    print("judge crashed: 503 from the judge API", flush=True)
    sys.exit(3)
answer = (run_dir / "predictions" / "p.txt").read_text()
print("judged:", answer, flush=True)
(run_dir / "result.json").write_text(json.dumps({"outcome": "passed", "score": 1.0}))
"""


class Sweep:
    """An eval → judge sweep whose judge fails on its first run only."""

    def __init__(self, directory: Path, **fields: Any) -> None:
        self.dir = directory
        self.trace = directory / "trace.txt"
        self.eval = write_job_script(directory, EVAL_SCRIPT, name="eval.py")
        self.judge = write_job_script(directory, JUDGE_SCRIPT, name="judge.py")
        self.path = directory / "sweep.yaml"
        self.write(**fields)

    def write(self, *, eval_extra: tuple[str, ...] = (), **fields: Any) -> None:
        py = sys.executable
        steps = [
            {
                "name": "eval",
                "command": [
                    py,
                    str(self.eval),
                    "{case}",
                    "{run_dir}",
                    str(self.trace),
                    *eval_extra,
                ],
                "expect": ["predictions/p.txt"],
            },
            {
                "name": "judge",
                "command": [
                    py,
                    str(self.judge),
                    "{run_dir}",
                    str(self.trace),
                    str(self.dir / "flag"),
                ],
            },
        ]
        sweep = {"cases": ["c01"], "models": ["m"], "steps": steps, **fields}
        self.path.write_text(json.dumps(sweep), encoding="utf-8")

    def run(self, **options: Any) -> int:
        out = io.StringIO()
        return run_main(self.path, RunOptions(progress=False, **options), out=out, err=out)

    def runs(self) -> list[str]:
        """Which steps ran so far, in order (then forget them)."""
        lines = self.trace.read_text().split()
        self.trace.unlink()
        return lines

    @property
    def batch_dir(self) -> Path:
        (found,) = (self.dir / "runs").iterdir()
        return found

    def records(self) -> list[dict[str, Any]]:
        paths = sorted(self.batch_dir.glob("m/*/run-meta.json"))
        return [json.loads(path.read_text()) for path in paths]

    def summary_row(self) -> dict[str, Any]:
        return json.loads((self.batch_dir / "batch-summary.json").read_text())["jobs"][0]


def statuses(steps: list[dict[str, Any]]) -> list[str]:
    return [f"{step['name']}:{step['status']}" for step in steps]


def test_retry_failed_reruns_only_the_failed_judge_on_the_evals_artifacts(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    assert sweep.run() == 1
    assert sweep.runs() == ["eval", "judge"]
    assert statuses(sweep.summary_row()["steps"]) == ["eval:passed", "judge:error"]

    assert sweep.run(retry_failed=True) == 0
    assert sweep.runs() == ["judge"]
    first, second = sweep.records()
    assert statuses(second["steps"]) == ["eval:reused", "judge:passed"]
    assert second["steps"][0]["reused_from"] == first["run_dir"]
    assert second["steps"][0]["duration_seconds"] == first["steps"][0]["duration_seconds"]
    assert (second["outcome"], second["result"]) == ("passed", {"score": 1.0})
    old, new = sweep.batch_dir / first["run_dir"], sweep.batch_dir / second["run_dir"]
    assert (
        os.stat(new / "predictions" / "p.txt").st_ino
        == os.stat(old / "predictions" / "p.txt").st_ino
    )
    log = (new / "output.log").read_text()
    assert "eval output for c01" in log and "judged: answer for c01" in log
    assert "judge crashed" not in log  # the failed attempt's output stays in its own run dir
    assert f"--- batch: steps eval reused from {first['run_dir']}" in log
    row = sweep.summary_row()
    assert (row["status"], statuses(row["steps"])) == ("passed", ["eval:reused", "judge:passed"])


def test_a_changed_eval_command_makes_the_retry_run_every_step(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    assert sweep.run() == 1
    sweep.runs()
    sweep.write(eval_extra=("--shots=5",))
    assert sweep.run(retry_failed=True) == 0
    assert sweep.runs() == ["eval", "judge"]
    assert statuses(sweep.records()[1]["steps"]) == ["eval:passed", "judge:passed"]


def test_automatic_retries_also_start_from_the_failed_step(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path, retries=1, retry_backoff=0)
    assert sweep.run() == 0
    assert sweep.runs() == ["eval", "judge", "judge"]
    assert statuses(sweep.records()[1]["steps"]) == ["eval:reused", "judge:passed"]


def test_reused_artifacts_that_have_gone_missing_make_every_step_run(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    assert sweep.run() == 1
    sweep.runs()
    (first,) = sweep.records()
    (sweep.batch_dir / first["run_dir"] / "predictions" / "p.txt").unlink()
    assert sweep.run(retry_failed=True) == 0
    assert sweep.runs() == ["eval", "judge"]
    second = sweep.records()[1]
    assert statuses(second["steps"]) == ["eval:passed", "judge:passed"]
    log = (sweep.batch_dir / second["run_dir"] / "output.log").read_text()
    assert f"cannot reuse steps of {first['run_dir']}; running every step" in log


# --- the local-models example against its mock server ----------------------------------------

EXAMPLE = REPO_ROOT / "examples" / "local-models"


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example copied to tmp_path, its mock server up on a free loopback port."""
    directory = tmp_path / "local-models"
    shutil.copytree(EXAMPLE, directory, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    sweep = directory / "sweep.yaml"
    # This interpreter rather than whatever python3 is on PATH; quicker waits between models.
    text = sweep.read_text().replace("python3", sys.executable)
    assert text.count("{cooldown: 1s}") == 1
    text = text.replace("{cooldown: 1s}", "{cooldown: 10ms}")
    sweep.write_text(text.replace("poll_interval: 500ms", "poll_interval: 10ms"))
    port_file = directory / "port.txt"
    options = ["--port", "0", "--port-file", str(port_file), "--idle-exit", "30"]
    options += ["--load-seconds", "0", "--flaky-judge", "2"]
    server = subprocess.Popen(
        [sys.executable, str(directory / "mock_server.py"), *options], stdout=subprocess.DEVNULL
    )
    try:
        assert wait_until(port_file.exists, timeout=10)
        monkeypatch.setenv("BASE_URL", f"http://127.0.0.1:{port_file.read_text()}/v1")
        yield directory
    finally:
        server.terminate()
        server.wait(10)


def test_the_local_models_example_checks_runs_and_retries_only_the_judge(example: Path) -> None:
    sweep, out = example / "sweep.yaml", io.StringIO()
    assert check_main(sweep, out=out, err=out) == 0
    assert "| mock-qwen-7b | yes | ok |" in out.getvalue()
    assert "| mock-weak-3b | yes | ok |" in out.getvalue()

    assert run_main(sweep, RunOptions(progress=False), out=out, err=out) == 1
    (batch_dir,) = (example / "runs").glob("local-models-*")
    rows = json.loads((batch_dir / "batch-summary.json").read_text())["jobs"]
    assert sorted(row["status"] for row in rows) == ["error"] * 2 + ["failed"] * 2 + ["passed"] * 4
    assert all(row["steps"][0]["status"] == "passed" for row in rows)  # judge outages only

    assert run_main(sweep, RunOptions(progress=False, retry_failed=True), out=out, err=out) == 0
    rows = json.loads((batch_dir / "batch-summary.json").read_text())["jobs"]
    retried = [row for row in rows if not row["resumed"]]
    assert len(retried) == 2
    assert all(statuses(row["steps"]) == ["eval:reused", "judge:passed"] for row in retried)
