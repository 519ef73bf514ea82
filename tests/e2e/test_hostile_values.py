"""Hostile values: every duration, size, count and rate, option or sweep key, at its extremes.

Each is one line and exit status 2, before anything is written — never a traceback, never a
sweep that starts and dies on it later (docs/reliability.md, "5. Hostile and odd input").
The bounds are in ``batch/durations.py`` (ten years), ``batch/sweep/sizes.py`` (1 PiB),
``batch/sweep/nodes.py`` (counts: a C int) and ``batch/policies/spend.py`` (dollars).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from batch.cli import main

NINES = "9" * 400

#: (sweep lines added to a valid sweep, options, a fragment of the one line expected).
CASES: list[tuple[str, tuple[str, ...], str]] = [
    # options of the command line
    ("", ("--deadline", "999999999h"), "--deadline: duration '999999999h' is too long"),
    ("", ("--deadline", "99999999999999h"), "--deadline: duration '99999999999999h' is too long"),
    ("", ("--deadline", NINES + "s"), "--deadline: duration"),
    ("", ("--deadline", "1e308s"), "--deadline: cannot read deadline"),
    ("", ("--deadline", "0001-01-01T00:00"), "is not in the future"),
    ("", ("--halt", "soon,fail=1000%"), "--halt: "),
    ("", ("--halt", "now,error=1e308%"), "--halt: "),
    ("", ("-j", "0"), "-j"),
    ("", ("--max-attempts", "0"), "--max-attempts"),
    # durations
    ("timeout: 999999999999h", (), "timeout: duration '999999999999h' is too long"),
    (f"timeout: {NINES}", (), "timeout: duration"),
    ("timeout: .inf", (), "timeout: duration inf is too long"),
    ("kill_grace: 1e308", (), "kill_grace: duration 1e+308 is too long"),
    ("stagger: 1e308", (), "stagger: duration"),
    ("retry_backoff: 99999999h", (), "retry_backoff: duration"),
    ("summary_interval: 1e300", (), "summary_interval: duration"),
    ("stall: 999999999h", (), "stall: duration"),
    ("stall: .nan", (), "stall: duration nan is not a finite number"),
    ("notify: {commands: [[x]], timeout: 1e308}", (), "notify.timeout: duration"),
    ("breaker: {cooldown: 1e308}", (), "breaker.cooldown: duration"),
    ("models: [{id: m1, probe: {command: [x], timeout: 1e300}}]", (), "timeout: duration"),
    ("cases: [{id: c1, timeout: 99999999h}]", (), "timeout: duration"),
    ("executor: {kind: slurm, walltime: 1e300}", (), "walltime: duration"),
    # sizes
    (f"memfree: {NINES}", (), "memfree: size"),
    ("memfree: 1e400", (), "memfree: size inf is too large"),
    ("memfree: .nan", (), "memfree: size nan is not a number"),
    (f"memfree: {NINES}TiB", (), "memfree: size"),
    (f"executor: {{kind: slurm, memory: {NINES}}}", (), "executor.memory: size"),
    # counts
    (f"max_concurrent: {NINES}", (), "max_concurrent: must be at most 2147483647"),
    (f"retries: {NINES}", (), "retries: must be at most"),
    (f"max_attempts: {NINES}", (), "max_attempts: must be at most"),
    (f"executor: {{kind: slurm, cores: {NINES}}}", (), "executor.cores: must be at most"),
    (f"executor: {{kind: slurm, workers: {NINES}}}", (), "executor.workers: must be at most"),
    (f"breaker: {{threshold: {NINES}}}", (), "breaker.threshold: must be at most"),
    (f"halt: {{broken_setup_window: {NINES}}}", (), "broken_setup_window: must be at most"),
    (f"models: [{{id: m1, max_concurrent: {NINES}}}]", (), "max_concurrent: must be at most"),
    # money and rates
    (f"budget: {{cost_usd: {NINES}}}", (), "budget.cost_usd: cost_usd must be at most 1e+12"),
    ("budget: {cost_usd: 1e400}", (), "cost_usd must be at most"),
    (f"models: [{{id: m1, budget: {{cost_usd: {NINES}}}}}]", (), "cost_usd must be at most"),
    (
        f"order: model-major\nbetween_models: {{settle: {{epsilon_mb: {NINES}}}}}",
        (),
        "epsilon_mb: expected a number of MB above 0 and at most",
    ),
]


@pytest.mark.parametrize(("lines", "options", "fragment"), CASES, ids=lambda v: str(v)[:40])
def test_a_hostile_value_is_one_line_exit_2_and_nothing_written(
    lines: str, options: tuple[str, ...], fragment: str, tmp_path: Path
) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "c1.json").write_text("{}")
    sweep = tmp_path / "sweep.yaml"
    models = "" if "\nmodels:" in f"\n{lines}" else "models: [m1]\n"
    cases = "" if "\ncases:" in f"\n{lines}" else 'cases: {dir: cases, glob: "*.json"}\n'
    sweep.write_text(f'name: hostile\n{cases}command: ["true"]\n{models}{lines}\n')

    result = CliRunner().invoke(main, [str(sweep), "--no-progress", *options])

    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)
    text = result.stderr.strip().splitlines()
    assert len(text) == 1 or (text and text[0].startswith("Usage:")), result.stderr
    assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()
