"""The live view, driven through its methods as the driver calls them and read as the
terminal shows it (a 100-column console): stopping and killing, retry waits, steps, a line
per model, many failures."""

# The view joins case and model with U+00D7, as users see it.
# ruff: noqa: RUF001

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.terminal import screen
from rich.console import Console

from batch.display.live import MAX_FAILURE_LINES, LiveDisplay
from batch.display.live_parts import MAX_MODEL_ROWS
from batch.plan.jobs import Job

SUMMARY = Path("runs/demo/batch-summary.json")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def jobs(cases: int, *models: str) -> list[Job]:
    return [Job(case=f"c{n}", model=model) for n in range(1, cases + 1) for model in models]


def finish(job: Job, status: str, seconds: float = 1.0, category: str | None = None) -> Job:
    job.status, job.duration_seconds, job.failure_category = status, seconds, category
    return job


class Terminal:
    """A LiveDisplay on a terminal 100 columns wide and ``height`` lines high; the test
    draws each frame itself."""

    def __init__(self, clock: Clock, height: int = 30) -> None:
        self.out = io.StringIO()
        console = Console(
            file=self.out, force_terminal=True, width=100, height=height, color_system=None
        )
        self.height = height
        self.display = LiveDisplay(console, clock=clock, refresh_per_second=0.01)

    def lines(self) -> list[str]:
        """Everything on the terminal now, scrollback included, after one more redraw."""
        self.display.refresh()
        return screen(self.out.getvalue())

    def view(self) -> list[str]:
        """The live view as it stands (the last frame, from its batch line down)."""
        lines = self.lines()
        top = max(i for i, line in enumerate(lines) if line.startswith("Batch "))
        return lines[top:]

    def text(self) -> str:
        return "\n".join(self.view())


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def term(clock: Clock) -> Iterator[Terminal]:
    term = Terminal(clock)
    yield term
    term.display.close()


def bar(term: Terminal) -> str:
    (line,) = [line for line in term.view() if line.startswith("sweep ")]
    return line


def rows(term: Terminal) -> list[list[str]]:
    """The running table's job rows, split on runs of two or more spaces."""
    return [
        re.split(r"  +", line)
        for line in term.view()
        if re.match(r"^\S+ × \S+ +\d+ +(retry in )?[\d.]", line)
    ]


class TestStopping:
    """After Ctrl-C: no ETA for jobs that will not run, no killed job listed as running."""

    def test_the_eta_gives_way_to_stopping_then_killing(self, term, clock):
        a, b, c, d = jobs(4, "m")
        term.display.begin([a, b, c, d], batch_dir=Path("b"), carried=0, to_run=4)
        for job in (a, b, c):
            term.display.job_started(job, 1)
        clock.advance(60)
        term.display.job_finished(finish(a, "passed"))
        assert "ETA 0:03:00" in bar(term)

        term.display.stopping()  # the first Ctrl-C
        assert "stopping" in bar(term) and "ETA" not in bar(term)
        term.display.stopping(killing=True)  # the second
        assert "killing" in bar(term) and "ETA" not in bar(term)

    def test_a_killed_job_leaves_the_running_list_and_says_it_is_left_for_resume(self, term, clock):
        a, b = jobs(2, "m")
        term.display.begin([a, b], batch_dir=Path("b"), carried=0, to_run=2)
        term.display.job_started(a, 1)
        term.display.job_started(b, 1)
        term.display.stopping(killing=True)
        a.status = "skipped"
        term.display.job_stopped(a, "killed by the user's abort")
        assert [row[0] for row in rows(term)] == ["c2 × m"]
        assert "running 1" in term.text()
        assert "c1 × m: killed by the user's abort; left for --resume" in term.lines()

    def test_the_last_frame_of_an_interrupted_sweep_lists_no_job_and_no_eta(self, term):
        a, b = jobs(2, "m")
        term.display.begin([a, b], batch_dir=Path("b"), carried=0, to_run=2)
        term.display.job_started(a, 1)
        term.display.job_started(b, 1)
        term.display.job_finished(finish(a, "passed"))
        b.status = "skipped"  # the driver marks what never finished; no event says so
        term.display.end([a, b], state="interrupted", elapsed=5, summary_path=SUMMARY)
        lines = screen(term.out.getvalue())
        table = max(i for i, line in enumerate(lines) if line.split()[-1:] == ["jobs"])
        top = max(i for i, line in enumerate(lines[:table]) if line.startswith("Batch "))
        last_frame = "\n".join(lines[top:table])
        assert "interrupted" in last_frame and "ETA" not in last_frame
        assert "running 0" in last_frame and "c2 × m" not in last_frame


class TestRetryWaits:
    def test_jobs_waiting_for_a_retry_are_counted_apart_and_listed_after_running_ones(
        self, term, clock
    ):
        a, n1, b, n2, c, n3 = jobs(3, "m", "n")  # two models: the view has a line per model
        term.display.begin([a, n1, b, n2, c, n3], batch_dir=Path("b"), carried=0, to_run=6)
        term.display.job_started(a, 1)
        term.display.job_started(b, 1)
        term.display.job_started(c, 1)
        clock.advance(4)
        term.display.job_retrying(finish(a, "error", 4, "infra_failure"), 30, "infra_failure")
        clock.advance(2)
        assert "running 2   waiting to retry 1" in term.text()
        assert rows(term) == [
            ["c2 × m", "1", "6.0s"],
            ["c3 × m", "1", "6.0s"],
            ["c1 × m", "1", "retry in 28s", "infra_failure"],
        ]

    def test_on_stopping_a_retry_wait_ends_as_the_job_last_did(self, term):
        a, b = jobs(2, "m")
        term.display.begin([a, b], batch_dir=Path("b"), carried=0, to_run=2)
        term.display.job_started(a, 1)
        term.display.job_started(b, 1)
        term.display.job_retrying(finish(a, "error", 4, "infra_failure"), 30, "infra_failure")
        term.display.stopping()  # the scheduler drops the retry
        assert "error 1   running 1" in term.text() and "waiting to retry" not in term.text()
        assert [row[0] for row in rows(term)] == ["c2 × m"]
        assert "1/2" in bar(term)
        assert "c1 × m: ERROR (infra_failure) in 4.0s" in term.lines()


class TestSkips:
    def test_a_job_a_policy_skips_gets_a_line_and_the_bar_ends_at_100_percent(self, term):
        a, b, c, d = jobs(4, "m")
        term.display.begin([a, b, c, d], batch_dir=Path("b"), carried=0, to_run=4)
        term.display.job_started(a, 1)
        term.display.job_finished(finish(a, "passed"))
        for job in (b, c):
            job.status = "skipped"
            term.display.job_skipped(job, "deadline 07:00: expected 1h00m00s, 5m00s left")
        term.display.job_started(d, 1)
        term.display.job_retrying(finish(d, "error", 4, "infra_failure"), 30, "infra_failure")
        term.display.job_skipped(d, "breaker open: 2 consecutive infra_failure")
        assert "skipped 2" in term.text() and "waiting to retry" not in term.text()
        assert rows(term) == []
        assert "4/4" in bar(term) and "100%" in bar(term)
        lines = term.lines()
        assert "c2 × m: deadline 07:00: expected 1h00m00s, 5m00s left; left for --resume" in lines
        assert (
            "c4 × m: ERROR (infra_failure) in 4.0s; not retried: breaker open: 2 consecutive "
            "infra_failure"
        ) in lines

    def test_a_model_stop_when_stopped_says_so_on_its_line(self, term):
        a, n1, b, n2, c, n3 = jobs(3, "m", "n")  # two models: the view has a line per model
        term.display.begin([a, n1, b, n2, c, n3], batch_dir=Path("b"), carried=0, to_run=6)
        term.display.job_started(a, 1)
        term.display.job_finished(finish(a, "passed"))
        reason = "stopped by stop_when: pass rate 90.0% (80.0 to 96.0%, ±4.0 pp) after 1 of 3 cases"
        for job in (b, c):
            job.status = "skipped"
            term.display.job_skipped(job, reason)
        lines = term.lines()
        assert any(line.split()[:4] == ["m", "stopped:", "stop_when", "3/3"] for line in lines)
        assert not any(line.split()[:2] == ["n", "stopped:"] for line in lines), lines
        assert f"c2 × m: {reason}" in lines  # not "left for --resume": its model is done

    def test_skip_lines_are_capped_and_the_rest_counted(self, clock):
        term = Terminal(clock)
        many = jobs(MAX_FAILURE_LINES + 3, "m")
        try:
            term.display.begin(many, batch_dir=Path("b"), carried=0, to_run=len(many))
            for job in many:
                job.status = "skipped"
                term.display.job_skipped(job, "budget m: $1.00 spent")
            lines = term.lines()
            assert sum(line.endswith("$1.00 spent; left for --resume") for line in lines) == (
                MAX_FAILURE_LINES
            )
            assert "\N{HORIZONTAL ELLIPSIS} and 3 more skipped, see batch-summary.json" in lines
            assert f"skipped {len(many)}" in term.text()
        finally:
            term.display.close()


class TestSteps:
    def test_a_multi_step_job_shows_the_step_it_is_on(self, term, clock):
        a, b = jobs(2, "m")
        term.display.begin([a, b], batch_dir=Path("b"), carried=0, to_run=2)
        term.display.job_started(a, 1)
        term.display.job_started(b, 1)
        term.display.job_step(a, "eval")
        clock.advance(3)
        term.display.job_step(a, "judge")
        assert rows(term) == [["c1 × m", "1", "3.0s", "step judge"], ["c2 × m", "1", "3.0s"]]
        # A retry starts over from the step it names; until then no step is running.
        term.display.job_retrying(finish(a, "error", 3, "infra_failure"), 10, "infra_failure")
        assert rows(term)[1] == ["c1 × m", "1", "retry in 10s", "infra_failure"]


class TestModels:
    @staticmethod
    def model_rows(term: Terminal) -> dict[str, list[str]]:
        view = term.view()
        header = next(i for i, line in enumerate(view) if line.startswith("model "))
        table = view[header : header + 1 + MAX_MODEL_ROWS + 1]
        return {line.split()[0]: line.split()[1:] for line in table if line.strip()}

    def test_several_models_get_a_line_each_with_progress_and_the_adaptive_limit(self, term, clock):
        carried = finish(Job("c0", "m1", decision="carry"), "passed")
        a1, a2 = jobs(2, "m1")
        b1, b2 = jobs(2, "m2")
        plan = [carried, a1, a2, b1, b2]
        term.display.begin(plan, batch_dir=Path("b"), carried=1, to_run=4)
        for job in (a1, a2, b1):
            term.display.job_started(job, 1)
        term.display.job_finished(finish(a1, "passed"))
        term.display.job_finished(finish(a2, "failed", 1, "model_wrong"))
        term.display.job_retrying(finish(b1, "error", 1, "infra_failure"), 30, "infra_failure")
        term.display.job_started(b2, 1)
        term.display.model_limit("m2", 2, 4)
        models = self.model_rows(term)
        assert models["model"] == ["done", "passed", "failed", "error", "running", "limit"]
        # m1 (c0 carried, c1 passed, c2 failed); m2: c1 waits for its retry, c2 runs.
        assert models["m1"] == ["3/3", "2", "1", "0", "0"]
        assert models["m2"] == ["0/2", "0", "0", "0", "1", "2/4"]

    def test_a_pool_gets_a_line_that_follows_its_changes(self, term):
        a, b = jobs(2, "m")
        term.display.begin([a, b], batch_dir=Path("b"), carried=0, to_run=2)
        term.display.pool("key", "key: 8 at once, 6/s; 2 sweeps; 0 refused")
        term.display.pool("key", "key: 4 at once, 4.2/s; 3 sweeps; 2 refused")
        lines = [line for line in term.view() if line.startswith("pool ")]
        assert lines == ["pool key: 4 at once, 4.2/s; 3 sweeps; 2 refused"]

    def test_one_model_gets_no_model_lines(self, term):
        (a,) = jobs(1, "m")
        term.display.begin([a], batch_dir=Path("b"), carried=0, to_run=1)
        assert not any(line.startswith("model ") for line in term.view())

    def test_past_the_cap_unfinished_models_are_listed_first_and_the_rest_counted(self, term):
        models = [f"m{n:02d}" for n in range(MAX_MODEL_ROWS + 3)]
        plan = jobs(1, *models)
        term.display.begin(plan, batch_dir=Path("b"), carried=0, to_run=len(plan))
        for job in plan[:4]:
            term.display.job_started(job, 1)
            term.display.job_finished(finish(job, "passed"))
        listed = self.model_rows(term)
        unfinished, finished = models[4:], models[:4]
        assert [name for name in listed if name.startswith("m") and name != "model"] == [
            *unfinished,
            *finished[: MAX_MODEL_ROWS - len(unfinished)],
        ]
        assert "+3" in listed and listed["+3"] == ["more", "models"]


class TestManyFailures:
    def test_failure_lines_are_capped_and_the_batch_line_and_bar_stay_on_screen(self, clock):
        term = Terminal(clock, height=16)
        plan = jobs(MAX_FAILURE_LINES + 150, "m1", "m2")
        try:
            term.display.begin(plan, batch_dir=Path("runs/b"), carried=0, to_run=len(plan))
            for n, job in enumerate(plan):
                term.display.job_started(job, 1)
                if n % 10 == 0:  # the view is redrawn while failures pour in
                    term.display.refresh()
                term.display.job_finished(finish(job, "failed", 2, "model_wrong"))
            for job in jobs(12, "m3"):  # more running jobs than the screen has room for
                term.display.job_started(job, 1)
            lines = term.lines()
        finally:
            term.display.close()
        failures = [line for line in lines if ": FAILED (model_wrong)" in line]
        assert len(failures) == MAX_FAILURE_LINES
        more = len(plan) - MAX_FAILURE_LINES
        top = lines.index(f"… and {more} more failures, see batch-summary.json")
        assert lines[top - 1] == failures[-1]  # right below the last failure printed
        view = lines[top:]
        assert len(view) <= term.height  # all of it on screen
        assert view[1].startswith("Batch runs/b: 400 jobs")
        assert view[2].startswith("sweep ") and "400/400" in view[2]
        assert view[3].startswith("passed 0   failed 400   error 0   running 12")
        assert re.fullmatch(r"\+\d+ more", view[-1])  # the running list fits, the rest summed up


def test_model_lines_steps_and_stop_reasons_are_redacted_and_kept_to_one_line(clock):
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, color_system=None)
    display = LiveDisplay(
        console, clock=clock, redact=lambda s: s.replace("sk-123", "***"), refresh_per_second=0.01
    )
    a, b = Job("c1", "m-sk-123"), Job("c1", "m\nDONE c9 × m9: PASSED")
    try:
        display.begin([a, b], batch_dir=Path("b"), carried=0, to_run=2)
        display.job_started(a, 1)
        display.job_started(b, 1)
        display.job_step(a, "judge sk-123")
        display.model_limit("m-sk-123", 1, 2)
        display.refresh()
        display.job_stopped(b, "lost sk-123\x1b[2J")
        display.refresh()
    finally:
        display.close()
    text = out.getvalue()
    assert "sk-123" not in text and "\x1b[2J" not in text
    lines = screen(text)
    assert any(line.startswith("m-***") and line.endswith("1/2") for line in lines)
    assert any(line.startswith("m\\nDONE c9 × m9: PASSED ") for line in lines)
    assert not any(line.startswith("DONE") for line in lines)
    assert any(line.endswith("step judge ***") for line in lines)
    assert "c1 × m\\nDONE c9 × m9: PASSED: lost ***\\x1b[2J; left for --resume" in lines
