# ruff: noqa: RUF001
"""Every hint the driver prints does something, and can be pasted as it is.

The closing lines end in a command. Here each is taken from the real output of a real
``batch`` process, split as a shell would (``shlex``) and run as it stands; the test then
checks that it changed something — the job it names ran again and passed. The program is
repeated as it was run (``python -m batch.cli`` here, ``../../.venv/bin/batch`` for the
README's user), so the pasted line runs this very batch (docs/cli.md, "What it prints").
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from helpers.fake_jobs import fake_agent_command
from helpers.paths import REPO_ROOT


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args, "--no-progress"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        timeout=120,
    )


def run_hint(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Paste the command after the hint's last ``: `` into a shell (no shell: shlex)."""
    argv = shlex.split(line.rpartition(": ")[2])
    return subprocess.run(
        [*argv, "--no-progress"], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120
    )


def hint(output: str, fragment: str) -> str:
    lines = [line for line in output.splitlines() if fragment in line]
    assert len(lines) == 1, output
    return lines[0]


def write_sweep(directory: Path, extra: str = "", cases: tuple[str, ...] = ("c1", "c2")) -> None:
    """Each case's job fails with a non-model error once (exit 2), then passes."""
    (directory / "flags").mkdir()
    command = json.dumps(fake_agent_command("flaky=flags/{case}.flag"))
    (directory / "s w.yaml").write_text(
        f"name: hints\ncases: {json.dumps(list(cases))}\nmodels: [m1]\ncommand: {command}\n"
        f"retries: 0\n{extra}"
    )


def statuses(directory: Path) -> dict[str, tuple[str, int]]:
    (batch_dir,) = (directory / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    return {row["case"]: (row["status"], row["attempts"]) for row in summary["jobs"]}


def test_an_error_outside_the_selection_is_retried_by_the_hint_without_it(tmp_path: Path) -> None:
    write_sweep(tmp_path)
    first = batch("s w.yaml", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr

    selected = batch("s w.yaml", "--retry-failed", "--cases", "c1", cwd=tmp_path)

    assert selected.returncode == 1, selected.stdout + selected.stderr
    assert statuses(tmp_path)["c1"][0] == "passed"
    line = hint(selected.stdout, "ended in error")
    # Not the selection again: "--cases c1 --retry-failed" would retry nothing.
    assert "1 job outside the selection ended in error (infra_failure 1)" in line
    assert "--cases" not in line
    assert line.endswith("-m batch.cli 's w.yaml' --retry-failed"), line
    pasted = run_hint(line, tmp_path)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert statuses(tmp_path)["c2"] == ("passed", 2)
    assert "ended in error" not in pasted.stdout


def test_a_spent_attempt_budget_is_told_to_max_attempts_and_that_hint_runs_it(
    tmp_path: Path,
) -> None:
    write_sweep(tmp_path, "max_attempts: 1\n", cases=("c1",))
    first = batch("s w.yaml", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr

    line = hint(first.stdout, "ended in error")

    assert "spent the attempt budget" in line
    assert line.endswith("'s w.yaml' --retry-failed --max-attempts 2"), line
    pasted = run_hint(line, tmp_path)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert statuses(tmp_path)["c1"] == ("passed", 2)


def test_no_retry_is_announced_that_the_open_breaker_refuses(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "name: breaker\ncases: [c1]\nmodels: [m1]\n"
        f"command: {json.dumps(fake_agent_command('exit=3'))}\n"
        "retries: 2\nretry_backoff: 0s\nbreaker: {threshold: 1}\nhalt: off\n"
    )

    result = batch("s.yaml", cwd=tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "breaker open" in result.stdout
    assert "RETRY" not in result.stdout, result.stdout
    assert "not retried: breaker open" in result.stdout
    (batch_dir,) = (tmp_path / "runs").iterdir()
    events = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    assert not [line for line in events if json.loads(line)["event"] == "retry"]


def test_jobs_a_halt_now_stops_are_not_said_killed_by_the_users_abort(tmp_path: Path) -> None:
    slow, fails = fake_agent_command("sleep=30"), fake_agent_command("sleep=0.3", "exit=3")
    (tmp_path / "s.yaml").write_text(
        "name: halted\ncases: [c1, c2]\nmodels: [m1]\n"
        f'command: [sh, -c, \'if [ "$BATCH_CASE" = c1 ]; then exec "$@" {" ".join(slow[1:])}; '
        f'else exec "$@" {" ".join(fails[1:])}; fi\', sh, {json.dumps(sys.executable)}]\n'
        "kill_grace: 1s\nmax_concurrent: 2\nretries: 0\n"
    )

    result = batch("s.yaml", "--halt", "now,error=1", cwd=tmp_path)

    assert result.returncode == 4, result.stdout + result.stderr
    line = hint(result.stdout, "c1 × m1:")
    assert "stopped by the halt rule (halt now); left for --resume" in line
    assert "user's abort" not in result.stdout


def test_jobs_the_deadline_stops_are_said_stopped_at_the_deadline(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "name: late\ncases: [c1]\nmodels: [m1]\n"
        f"command: {json.dumps(fake_agent_command('sleep=30'))}\nkill_grace: 1s\n"
    )

    result = batch("s.yaml", "--deadline", "1s", cwd=tmp_path)

    assert result.returncode == 4, result.stdout + result.stderr
    assert "c1 × m1: stopped at the deadline; left for --resume" in result.stdout
    assert "user's abort" not in result.stdout


def test_the_hint_repeats_the_program_as_it_was_run_by_its_path(tmp_path: Path) -> None:
    """The README's way, ``../../.venv/bin/batch``: a bare ``batch`` may not be on PATH,
    or may be Debian's ``at``."""
    script = Path(sys.executable).with_name("batch")
    assert script.is_file(), "the batch console script (pip install -e .)"
    write_sweep(tmp_path, cases=("c1",))
    typed = os.path.relpath(script, tmp_path)
    env = {**_env(), "PATH": "/usr/bin:/bin"}  # no batch of ours on it

    first = subprocess.run(
        [typed, "s w.yaml", "--no-progress"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )

    line = hint(first.stdout, "ended in error")
    assert line.endswith(f": {shlex.quote(typed)} 's w.yaml' --retry-failed"), line
    pasted = run_hint(line, tmp_path)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert statuses(tmp_path)["c1"] == ("passed", 2)


def test_on_an_80_column_terminal_the_hint_and_the_failure_lines_are_never_broken(
    tmp_path: Path,
) -> None:
    """The hint is one line of output whatever the terminal's width: a line broken inside
    the command (``… -o`` ⏎ ``…/runs --retry-failed``) runs ``-o`` with no value when pasted.
    A failure line above the live view is not broken mid-sentence either."""
    from helpers.terminal import TerminalDriver

    deep = tmp_path / "a-sweep-directory-with-a-long-name" / "and-another-level-below-it"
    deep.mkdir(parents=True)
    write_sweep(deep, cases=("a-case-whose-name-is-long-enough-to-fill-the-line", "c2"))
    driver = TerminalDriver(
        [sys.executable, "-m", "batch.cli", "s w.yaml", "-o", str(deep / "runs")],
        cwd=deep,
        env=_env(),
        columns=80,
        lines=30,
    )
    assert driver.wait(120) == 1
    lines = driver.screen()
    text = "\n".join(lines)
    (line,) = [line for line in lines if "--retry-failed" in line]
    argv = shlex.split(line.rpartition(": ")[2])
    assert argv[argv.index("-o") + 1] == str(deep / "runs"), text
    assert argv[-1] == "--retry-failed", text
    (failure,) = [line for line in lines if line.startswith("a-case-whose-name")]
    assert re.search(r": ERROR \(infra_failure; exit code 2\) in [0-9.]+s$", failure), text
    # Pasted as it stands, it reruns the two jobs, which now pass.
    rerun = run_hint(line, deep)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
