"""The closing lines (batch/display/next_steps.py): each way a run ends, word for word."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.builders import make_job

from batch.display.next_steps import TypedCommand, closing_lines, invoked_program, typed_command
from batch.plan.jobs import NOT_SELECTED, Job
from batch.plan.planner import RunOptions

BATCH_DIR = Path("runs/nightly-20261130T020000Z")
TYPED = TypedCommand(("batch", "sweep.yaml"))


def jobs(**counts: int) -> list[Job]:
    """``passed=3, error_api_or_credit=2``: that many jobs of each status (and category)."""
    made = []
    for key, count in counts.items():
        status, _, category = key.partition("_")
        for n in range(count):
            job = make_job(f"{key}-{n}", "m1", status=status)
            job.failure_category = category or None
            made.append(job)
    return made


ENDINGS = {
    "complete, all passed": ("complete", jobs(passed=12), None, ["All 12 jobs passed."]),
    "complete, one job": ("complete", jobs(passed=1), None, ["1 job passed."]),
    "complete with errors": (
        "complete",
        jobs(passed=3, error_api_or_credit=12, error_infra_failure=1),
        None,
        [
            "13 jobs ended in error (api_or_credit 12, infra_failure 1): "
            "batch sweep.yaml --retry-failed"
        ],
    ),
    "complete with model failures": (
        "complete",
        jobs(passed=3, failed_model_failure=2),
        None,
        [
            "2 jobs failed (model_failure 2): the models' own results, kept; "
            f"compare them: batch stats {BATCH_DIR}"
        ],
    ),
    "complete with both": (
        "complete",
        jobs(error_task_data=1, failed_model_failure=1),
        None,
        [
            "1 job ended in error (task_data 1): batch sweep.yaml --retry-failed",
            "1 job failed (model_failure 1): the models' own results, kept; "
            f"compare them: batch stats {BATCH_DIR}",
        ],
    ),
    "complete, a job lost with its worker": (
        "complete",
        jobs(passed=2, skipped=1),
        None,
        ["1 job left without a result: batch sweep.yaml --resume"],
    ),
    "interrupted": (
        "interrupted",
        jobs(passed=2, skipped=5),
        None,
        ["Interrupted: 5 of 7 jobs not run: batch sweep.yaml --resume"],
    ),
    "interrupted with errors": (
        "interrupted",
        jobs(error_api_or_credit=1, skipped=1),
        None,
        [
            "Interrupted: 1 of 2 jobs not run: batch sweep.yaml --resume",
            "1 job ended in error (api_or_credit 1): batch sweep.yaml --retry-failed",
        ],
    ),
    "halted by a rule": (
        "halted",
        jobs(error_infra_failure=8, skipped=4),
        {
            "rule": "setup",
            "mode": "soon",
            "message": "first 8 jobs all ended in infra_failure (cannot start 'x'): stopping",
        },
        [
            "Halted: first 8 jobs all ended in infra_failure (cannot start 'x'): stopping",
            "4 jobs not run; fix the cause, then: batch sweep.yaml --resume",
            "8 jobs ended in error (infra_failure 8): batch sweep.yaml --retry-failed",
        ],
    ),
    "halted by a budget": (
        "halted",
        jobs(passed=5, skipped=3),
        {"rule": "budget", "mode": "soon", "message": "budget cost_usd 50 reached ($50.12)"},
        [
            "Halted: budget cost_usd 50 reached ($50.12)",
            "3 jobs not run; raise the budget in the sweep file, then: batch sweep.yaml --resume",
        ],
    ),
    "halted, the summary unreadable": (
        "halted",
        jobs(skipped=1),
        None,
        [
            "Halted: a halt rule stopped the sweep",
            "1 job not run; fix the cause, then: batch sweep.yaml --resume",
        ],
    ),
}


@pytest.mark.parametrize(("state", "ended", "halt", "expected"), ENDINGS.values(), ids=ENDINGS)
def test_each_ending_says_what_happened_and_what_to_type_next(
    state: str, ended: list[Job], halt: dict[str, str] | None, expected: list[str]
) -> None:
    assert closing_lines(state, ended, TYPED, batch_dir=BATCH_DIR, halt=halt) == expected


def test_jobs_left_out_by_the_selection_are_not_counted_as_unrun() -> None:
    # The line before says they were not selected; a pass of the rest is still all passed.
    left_out = jobs(skipped=2)
    for job in left_out:
        job.decision_reason = NOT_SELECTED
    ended = jobs(passed=3) + left_out
    assert closing_lines("complete", ended, TYPED, batch_dir=BATCH_DIR) == [
        "All 3 selected jobs passed."
    ]


class TestTypedCommand:
    def test_the_sweep_path_and_options_as_typed(self) -> None:
        options = RunOptions(
            output=Path("out dir"),
            resume="",
            retry_failed=True,
            case_globs=("c*",),
            model_globs=("gpt-*", "claude"),
            max_concurrent=8,
            executor="dask",
        )
        command = typed_command(Path("evals/night.yaml"), options)
        assert command.with_option("--retry-failed") == (
            "batch evals/night.yaml -o 'out dir' --cases 'c*' --models 'gpt-*' --models claude "
            "-j 8 --executor dask --retry-failed"
        )

    def test_a_batch_dir_named_with_resume_is_kept(self) -> None:
        command = typed_command(
            Path("sweep.yaml"), RunOptions(resume="runs/sweep-20261130T020000Z")
        )
        assert command.with_option("--resume") == (
            "batch sweep.yaml --resume runs/sweep-20261130T020000Z"
        )
        assert command.with_option("--retry-failed") == (
            "batch sweep.yaml --resume runs/sweep-20261130T020000Z --retry-failed"
        )

    def test_a_scheduler_address_stands_for_the_executor(self) -> None:
        options = RunOptions(executor="dask", scheduler="tcp://10.0.0.5:8786")
        assert typed_command(Path("s.yaml"), options).with_option("--resume") == (
            "batch s.yaml --scheduler tcp://10.0.0.5:8786 --resume"
        )


class TestInvokedProgram:
    """How the program was run, repeated in every hint (``sys.argv``, ``sys.orig_argv``)."""

    def test_a_script_run_by_its_path_is_that_path(self) -> None:
        argv = ["../../.venv/bin/batch", "sweep.yaml"]
        orig = ["/w/.venv/bin/python", *argv]
        assert invoked_program(argv, orig, lambda path: True) == ("../../.venv/bin/batch",)

    def test_python_dash_m_is_repeated_with_its_interpreter(self) -> None:
        argv = ["/w/batch/__main__.py", "sweep.yaml"]
        orig = ["python3", "-X", "dev", "-m", "batch", "sweep.yaml"]
        assert invoked_program(argv, orig, lambda path: False) == (
            "python3",
            "-X",
            "dev",
            "-m",
            "batch",
        )

    def test_a_script_found_on_path_is_its_name_only_while_that_name_finds_it(self) -> None:
        argv = ["/w/.venv/bin/batch", "s.yaml"]
        orig = ["/usr/bin/python3", *argv]
        assert invoked_program(argv, orig, lambda path: True) == ("batch",)
        # Debian's ``at`` first on PATH: a bare ``batch`` would run it.
        assert invoked_program(argv, orig, lambda path: False) == ("/w/.venv/bin/batch",)

    def test_every_hint_repeats_it_quoted(self) -> None:
        program = ("/home/me/my venv/bin/batch",)
        command = typed_command(Path("s.yaml"), RunOptions(), program)
        assert command.with_option("--resume") == "'/home/me/my venv/bin/batch' s.yaml --resume"
        assert command.other("stats", "runs/a b") == "'/home/me/my venv/bin/batch' stats 'runs/a b'"
