"""``batch check SWEEP``: reset, settle and probe each model; a table, check.json, check.md."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner
from helpers.fake_jobs import write_job_script

from batch.cli import handle, main
from batch.commands.check import check_main

#: A probe that "loads" a model unless its name says otherwise.
PROBE = """\
import sys
model = sys.argv[1]
print("probe", model, flush=True)
sys.exit(1 if "broken" in model else 0)
"""


def write_sweep(directory: Path, **fields: object) -> Path:
    probe = write_job_script(directory, PROBE, name="probe.py")
    sweep = {
        "cases": ["c01"],
        "models": ["qwen-7b", "broken-13b"],
        "command": ["true"],
        "order": "model-major",
        "probe": [sys.executable, str(probe), "{model}"],
        "between_models": {"settle": None},
        **fields,
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    return path


def ram(*readings: float) -> Iterator[float]:
    return iter(readings).__next__  # type: ignore[return-value]


def run_check(path: Path, readings: tuple[float, ...], *args: str) -> tuple[int, str, Path]:
    out = io.StringIO()
    status = handle(
        lambda: check_main(path, out=out, err=out, ram_poll=ram(*readings), model_globs=args), out
    )
    checks = path.parent / "runs" / "checks"
    return status, out.getvalue(), next(checks.iterdir())


def test_each_model_gets_a_row_with_loaded_status_and_ram_difference(tmp_path: Path) -> None:
    # RAM before/after the probe of each model in turn.
    status, printed, check_dir = run_check(write_sweep(tmp_path), (4000, 9000, 4100, 4150))
    assert status == 1  # a model did not load
    document = json.loads((check_dir / "check.json").read_text())
    rows = {row["model"]: row for row in document["models"]}
    assert list(rows) == ["qwen-7b", "broken-13b"]
    good, bad = rows["qwen-7b"], rows["broken-13b"]
    assert (good["loaded"], good["status"], good["delta_mb"]) == (True, "ok", 5000.0)
    assert (good["ram_before_mb"], good["ram_after_mb"]) == (4000.0, 9000.0)
    assert (bad["loaded"], bad["status"]) == (False, "probe failed (exit code 1)")
    assert bad["probe"]["exit_code"] == 1 and bad["delta_mb"] == 50.0
    assert "| qwen-7b | yes | ok | 4000 | 9000 | +5000 |" in printed
    assert "| broken-13b | no | probe failed (exit code 1) | 4100 | 4150 | +50 |" in printed
    assert (check_dir / "check.md").read_text() in printed
    log = (check_dir / "batch-logs" / "between-models.log").read_text()
    assert "probe qwen-7b" in log and "probe broken-13b" in log


def test_a_difference_below_half_a_mb_is_0_not_minus_0(tmp_path: Path) -> None:
    # 4000.0 -> 3999.7 MB printed "-0"; 4100 -> 4100.4 printed "+0".
    _, printed, _ = run_check(write_sweep(tmp_path), (4000, 3999.7, 4100, 4100.4))
    assert "| qwen-7b | yes | ok | 4000 | 4000 | 0 |" in printed
    assert "| broken-13b | no | probe failed (exit code 1) | 4100 | 4100 | 0 |" in printed


def test_a_failing_reset_is_in_the_status_and_the_probe_still_runs(tmp_path: Path) -> None:
    reset = write_job_script(tmp_path, "import sys; sys.exit(4)\n", name="reset.py")
    path = write_sweep(
        tmp_path,
        models=["qwen-7b"],
        between_models={"reset": [sys.executable, str(reset)], "settle": None},
    )
    status, _, check_dir = run_check(path, (100, 200))
    assert status == 1
    row = json.loads((check_dir / "check.json").read_text())["models"][0]
    assert row["status"] == "reset failed (exit code 4)"
    assert row["loaded"] is True and row["reset"]["ok"] is False


def test_the_settled_ram_is_the_baseline_before_the_probe(tmp_path: Path) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    def clock() -> float:
        return sum(slept)

    settle = {"epsilon_mb": 50, "plateau_polls": 2, "poll_interval": "3s", "timeout": "1m"}
    path = write_sweep(tmp_path, models=["qwen-7b"], between_models={"settle": settle})
    out = io.StringIO()
    readings = ram(8000, 6000, 5010, 5000, 4990, 7500)
    assert check_main(path, out=out, err=out, ram_poll=readings, sleep=sleep, clock=clock) == 0
    check_dir = next((tmp_path / "runs" / "checks").iterdir())
    row = json.loads((check_dir / "check.json").read_text())["models"][0]
    assert (row["ram_before_mb"], row["ram_after_mb"], row["delta_mb"]) == (4990, 7500, 2510)
    assert row["settle"] == {"settled": True, "waited_seconds": 12.0, "polls": 5}
    assert slept == [3.0] * 4


def test_models_can_be_picked_and_no_probe_means_loaded_unknown(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, probe=None)
    status, printed, _ = run_check(path, (10, 10), "qwen*")
    assert status == 0
    assert "| qwen-7b | - | no probe configured | 10 | 10 | 0 |" in printed
    assert "broken-13b" not in printed


def test_the_command_line_runs_the_check(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, models=["qwen-7b"])
    result = CliRunner().invoke(main, ["check", str(path), "-o", str(tmp_path / "elsewhere")])
    assert result.exit_code == 0, result.output
    assert "| qwen-7b | yes | ok |" in result.output
    assert list((tmp_path / "elsewhere" / "checks").glob("*/check.md"))


def test_a_broken_sweep_is_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("cases: [c]\nmodels: [m]\ncommand: [x]\nprobe: {timeout: 5s}\n")
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2
    assert "probe: missing required key 'command'" in result.output
    assert not (tmp_path / "runs").exists()


def test_an_output_root_that_is_a_file_is_exit_2_in_one_line(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, output="notes.txt")
    (tmp_path / "notes.txt").write_text("not a directory\n")
    out = io.StringIO()
    assert handle(lambda: check_main(path, out=out, err=out, ram_poll=ram()), out) == 2
    assert out.getvalue() == f"error: output root {tmp_path / 'notes.txt'}: not a directory\n"


def test_a_probe_that_prints_its_env_leaves_no_secret_in_the_log(tmp_path: Path) -> None:
    secret = "hf-probe-secret-0123456789"
    probe = write_job_script(tmp_path, "import os; print(dict(os.environ))\n", name="env.py")
    path = write_sweep(
        tmp_path,
        models=[{"id": "qwen-7b", "env": {"HF_TOKEN": secret}}],
        probe=[sys.executable, str(probe)],
    )
    status, _, check_dir = run_check(path, (100, 200))
    assert status == 0
    log = (check_dir / "batch-logs" / "between-models.log").read_text()
    assert "'HF_TOKEN': '[REDACTED]'" in log
    assert secret not in log


def test_a_failing_probe_and_reset_say_why_in_their_last_words_and_where_the_rest_is(
    tmp_path: Path,
) -> None:
    reset = write_job_script(
        tmp_path,
        "print('unloading'); print('lms: server not running'); raise SystemExit(4)\n",
        name="reset.py",
    )
    probe = write_job_script(
        tmp_path,
        "print('POST http://127.0.0.1:8765/v1/chat/completions')\n"
        "print('urlopen error [Errno 111] Connection refused')\n\nraise SystemExit(1)\n",
        name="refused_probe.py",
    )
    path = write_sweep(
        tmp_path,
        models=["qwen-7b"],
        between_models={"reset": [sys.executable, str(reset)], "settle": None},
        probe=[sys.executable, str(probe)],
    )
    status, printed, check_dir = run_check(path, (100, 200))
    assert status == 1
    log = check_dir / "batch-logs" / "between-models.log"
    assert printed.splitlines()[-4:-1] == [
        "qwen-7b: reset failed (exit code 4): unloading / lms: server not running",
        "qwen-7b: probe failed (exit code 1): POST http://127.0.0.1:8765/v1/chat/completions"
        " / urlopen error [Errno 111] Connection refused",
        f"  their whole output: {log}",
    ]
    row = json.loads((check_dir / "check.json").read_text())["models"][0]
    assert row["probe"]["output_tail"][-1] == "urlopen error [Errno 111] Connection refused"
