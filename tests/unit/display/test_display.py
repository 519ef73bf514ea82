"""The progress display: plain lines for logs, the live view for terminals, the final table."""

# Expected lines are exactly what users see; the display joins case and model with U+00D7.
# ruff: noqa: RUF001

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from batch.display.live import LiveDisplay
from batch.display.plain import UNWRAPPED, PlainDisplay, make_display
from batch.display.text import begin_text, final_table, table_text
from batch.durations import format_duration_hms as format_duration
from batch.plan.jobs import NOT_SELECTED, Job

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SUMMARY = Path("runs/demo/batch-summary.json")


class FakeClock:
    """Monotonic and wall clock in one, advanced by the test."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.wall = datetime(2024, 5, 1, 12, 0, 5)

    def __call__(self) -> float:
        return self.t

    def now(self) -> datetime:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.wall += timedelta(seconds=seconds)


def job(case: str, model: str, status: str = "pending", **kw: object) -> Job:
    return Job(case=case, model=model, status=status, **kw)  # type: ignore[arg-type]


def finish(j: Job, status: str, seconds: float, category: str | None = None) -> Job:
    j.status, j.duration_seconds, j.failure_category = status, seconds, category
    return j


def start_with_secret_everywhere(display: PlainDisplay | LiveDisplay, j: Job) -> None:
    """Every call before the job ends, each showing the secret ``sk-123``."""
    display.begin([j], batch_dir=Path("runs/sk-123"), carried=0, to_run=1)
    display.job_started(j, 1)
    display.job_retrying(j, 1, "bad key sk-123")
    display.waiting("key sk-123")
    display.message("token sk-123")


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def table_row(text: str, first_cell: str) -> list[str]:
    """The cells of the final-table row that starts with ``first_cell``."""
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{text}")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class TestPlain:
    @pytest.fixture
    def out(self) -> io.StringIO:
        return io.StringIO()

    @pytest.fixture
    def display(self, out: io.StringIO, clock: FakeClock) -> PlainDisplay:
        return PlainDisplay(out, now=clock.now, clock=clock, tick_every=None)

    def test_one_line_per_start_and_finish(self, display, out, clock):
        """A log gets a timestamped line when each job starts and ends, with its outcome."""
        a, b, c = job("c1", "m1"), job("c2", "m1"), job("c3", "m2")
        display.begin([a, b, c], batch_dir=Path("runs/demo"), carried=0, to_run=3)
        display.job_started(a, 1)
        clock.advance(62)
        display.job_finished(finish(a, "passed", 62.4))
        display.job_started(b, 2)
        display.job_finished(finish(b, "failed", 3.24, "model_wrong"))
        display.job_finished(finish(c, "error", 7201, "infra"))
        assert lines(out) == [
            "[2024-05-01 12:00:05] Batch runs/demo: 3 jobs, 0 carried over, 3 to run",
            "[2024-05-01 12:00:05] START c1 × m1 (attempt 1)",
            "[2024-05-01 12:01:07] DONE c1 × m1: PASSED in 1m02s",
            "[2024-05-01 12:01:07] START c2 × m1 (attempt 2)",
            "[2024-05-01 12:01:07] DONE c2 × m1: FAILED (model_wrong) in 3.2s",
            "[2024-05-01 12:01:07] DONE c3 × m2: ERROR (infra) in 2h00m01s",
        ]

    def test_a_job_a_policy_skips_gets_a_line_and_counts_toward_the_progress(
        self, display, out, clock
    ):
        """A breaker, budget, deadline or halt that starts no job says so, once per job,
        and the progress line reaches 100 % (a skipped job is done for this run)."""
        a, b, c = job("c1", "m1"), job("c2", "m1"), job("c3", "m1")
        display.begin([a, b, c], batch_dir=Path("runs/demo"), carried=0, to_run=3)
        display.job_finished(finish(a, "error", 2, "infra_failure"))
        b.status = "skipped"
        display.job_skipped(b, "breaker open: 2 consecutive infra_failure")
        # An in-run retry not started: the job's outcome stands, and says why no retry.
        display.job_skipped(finish(c, "error", 3, "api_or_credit"), "budget m1: $1.00 spent")
        clock.advance(60)
        display.tick()
        assert lines(out)[2:] == [
            "[2024-05-01 12:00:05] SKIP c2 × m1: breaker open: 2 consecutive infra_failure; "
            "left for --resume",
            "[2024-05-01 12:00:05] DONE c3 × m1: ERROR (api_or_credit) in 3.0s; not retried: "
            "budget m1: $1.00 spent",
            "[2024-05-01 12:01:05] PROGRESS 3/3 jobs (100%), ETA 0.0s",
        ]

    def test_a_stop_when_stop_says_why_once_per_model_and_counts_every_job(
        self, display, out, clock
    ):
        """A stop leaves all of a model's remaining cases: one SKIP line says why, the
        rest are counted without a line each."""
        jobs = [job(f"c{i}", model) for i in range(3) for model in ("m1", "m2")]
        display.begin(jobs, batch_dir=Path("runs/demo"), carried=0, to_run=6)
        why = "stopped by stop_when: pass rate 90.0% (86.0 to 94.0%, ±4.0 pp) after 200 of 3 cases"
        for each in jobs:
            each.status = "skipped"
            display.job_skipped(each, why)
        clock.advance(60)
        display.tick()
        rest = "; the model's other jobs left by the stop are skipped without a line"
        assert lines(out)[1:] == [
            f"[2024-05-01 12:00:05] SKIP c0 × m1: {why}{rest}",
            f"[2024-05-01 12:00:05] SKIP c0 × m2: {why}{rest}",
            "[2024-05-01 12:01:05] PROGRESS 6/6 jobs (100%), ETA unknown",
        ]

    def test_a_progress_line_every_minute_with_count_percentage_and_eta(self, display, out, clock):
        """A log that no event reaches for a while still says, each minute, how far the
        sweep is and when it should end (the rate of this run's finishes so far)."""
        jobs = [job(f"c{i}", "m1") for i in range(5)]
        display.begin(jobs, batch_dir=Path("runs/demo"), carried=1, to_run=4)
        clock.advance(59)
        display.tick()  # not a minute yet
        clock.advance(1)
        display.tick()
        display.job_finished(finish(jobs[1], "passed", 60))
        clock.advance(30)
        display.tick()  # half a minute since the last progress line
        display.job_finished(finish(jobs[2], "error", 90, "infra"))
        clock.advance(30)
        display.tick()
        display.job_retrying(jobs[3], 5, "rate limited")  # not a finish: no count
        clock.advance(150)
        display.tick()  # a late tick prints one line, not three
        assert lines(out)[1:] == [
            "[2024-05-01 12:01:05] PROGRESS 1/5 jobs (20%), ETA unknown",
            "[2024-05-01 12:01:05] DONE c1 × m1: PASSED in 1m00s",
            "[2024-05-01 12:01:35] DONE c2 × m1: ERROR (infra) in 1m30s",
            "[2024-05-01 12:02:05] PROGRESS 3/5 jobs (60%), ETA 2m00s",
            "[2024-05-01 12:02:05] RETRY c3 × m1 in 5.0s: rate limited",
            "[2024-05-01 12:04:35] PROGRESS 3/5 jobs (60%), ETA 4m30s",
        ]

    def test_no_progress_line_after_the_end(self, display, out, clock):
        j = job("c1", "m1")
        display.begin([j], batch_dir=Path("runs/demo"), carried=0, to_run=1)
        display.end([finish(j, "passed", 1)], state="complete", elapsed=1, summary_path=SUMMARY)
        clock.advance(600)
        display.tick()
        assert "PROGRESS" not in out.getvalue()

    def test_the_ticker_thread_prints_progress_on_its_own(self, out, clock):
        display = PlainDisplay(out, now=clock.now, clock=clock, tick_every=0.01)
        display.begin([job("c1", "m1")], batch_dir=Path("runs/demo"), carried=0, to_run=1)
        clock.advance(60)
        deadline = time.monotonic() + 5
        while "PROGRESS" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        display.close()
        assert "[2024-05-01 12:01:05] PROGRESS 0/1 jobs (0%), ETA unknown" in lines(out)

    def test_retry_wait_and_message_lines(self, display, out):
        """Retries, waits and notes show up once each; a repeated wait is not repeated."""
        display.job_retrying(job("c1", "m1"), 30, "rate limited")
        display.waiting("memory gate: 1.0 GB free")
        display.waiting("memory gate: 1.0 GB free")
        display.waiting(None)
        display.waiting("memory gate: 1.0 GB free")
        display.message("Ctrl-C again to kill")
        assert lines(out) == [
            "[2024-05-01 12:00:05] RETRY c1 × m1 in 30s: rate limited",
            "[2024-05-01 12:00:05] WAIT memory gate: 1.0 GB free",
            "[2024-05-01 12:00:05] WAIT memory gate: 1.0 GB free",
            "[2024-05-01 12:00:05] Ctrl-C again to kill",
        ]

    def test_final_table_counts_per_model_and_total(self, display, out):
        """The end table counts each model's outcomes and the totals, without escapes."""
        jobs = [
            finish(job("c1", "m1"), "passed", 1),
            finish(job("c2", "m1"), "passed", 1),
            finish(job("c3", "m1"), "failed", 1),
            finish(job("c1", "m2"), "error", 1),
            job("c2", "m2", status="skipped"),
            job("c3", "m2", status="pending"),
        ]
        display.end(jobs, state="interrupted", elapsed=3723, summary_path=SUMMARY)
        text = out.getvalue()
        header = table_row(text, "model")
        assert header == ["model", "passed", "failed", "error", "skipped", "not", "run", "jobs"]
        assert table_row(text, "m1")[1:] == ["2", "1", "0", "0", "0", "3"]
        assert table_row(text, "m2")[1:] == ["0", "0", "1", "1", "1", "3"]
        assert table_row(text, "total")[1:] == ["2", "1", "1", "1", "1", "6"]
        assert lines(out)[-1] == f"Sweep interrupted after 1h02m03s. Summary: {SUMMARY}"
        assert "\x1b" not in text

    def test_final_table_has_no_not_run_column_when_all_ran(self, display, out):
        jobs = [finish(job("c1", "m1"), "passed", 1)]
        display.end(jobs, state="completed", elapsed=5, summary_path=SUMMARY)
        assert "not run" not in out.getvalue()
        assert table_row(out.getvalue(), "total")[1:] == ["1", "0", "0", "0", "1"]

    def test_secrets_are_redacted_everywhere(self, out, clock):
        display = PlainDisplay(out, now=clock.now, redact=lambda s: s.replace("sk-123", "***"))
        j = job("case-sk-123", "model-sk-123")
        start_with_secret_everywhere(display, j)
        display.job_finished(finish(j, "failed", 1, "sk-123"))
        display.end([j], state="completed", elapsed=1, summary_path=Path("sk-123/s.json"))
        assert "sk-123" not in out.getvalue()
        assert "model-***" in out.getvalue()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "?"), (0.42, "0.4s"), (42.4, "42s"), (62, "1m02s"), (3600, "1h00m00s")],
)
def test_durations_read_as_minutes_and_seconds(seconds, text):
    assert format_duration(seconds) == text


class TestLive:
    @pytest.fixture
    def out(self) -> io.StringIO:
        return io.StringIO()

    @pytest.fixture
    def display(self, out: io.StringIO, clock: FakeClock) -> Iterator[LiveDisplay]:
        console = Console(file=out, force_terminal=True, width=120, color_system=None)
        # A slow drawing thread: the tests draw frames themselves with refresh().
        display = LiveDisplay(console, clock=clock, refresh_per_second=0.01)
        yield display
        display.close()

    @staticmethod
    def frame(display: LiveDisplay, out: io.StringIO) -> str:
        """What one redraw puts on the screen, escapes removed."""
        out.seek(0)
        out.truncate()
        display.refresh()
        return ANSI.sub("", out.getvalue())

    def test_shows_progress_counts_and_running_jobs(self, display, out, clock):
        carried = finish(job("c0", "m1", decision="carry"), "passed", 1)
        a, b, c = job("c1", "m1"), job("c2", "m1"), job("c3[x]", "m2")
        display.begin([carried, a, b, c], batch_dir=Path("runs/demo"), carried=1, to_run=3)
        display.job_started(a, 1)
        display.job_started(c, 2)
        clock.advance(5)
        display.job_finished(finish(a, "failed", 5, "model_wrong"))
        display.job_started(b, 1)
        clock.advance(2)
        screen = self.frame(display, out)
        assert "2/4" in screen
        assert "passed 1   failed 1   error 0   running 2   (1 carried over)" in screen
        assert "c1 × m1: FAILED (model_wrong) in 5.0s" in screen
        assert re.search(r"c3\[x\] × m2 +2 +7\.0s", screen)
        assert re.search(r"c2 × m1 +1 +2\.0s", screen)
        assert "elapsed 0:00:07" in screen

    def test_running_list_is_capped_with_a_count_of_the_rest(self, display, out):
        jobs = [job(f"case{i:02d}", "m") for i in range(15)]
        display.begin(jobs, batch_dir=Path("b"), carried=0, to_run=15)
        for j in jobs:
            display.job_started(j, 1)
        screen = self.frame(display, out)
        assert "case09 × m" in screen
        assert "case10 × m" not in screen
        assert "+5 more" in screen

    def test_waiting_and_retrying_are_shown_until_cleared(self, display, out, clock):
        j = job("c1", "m1")
        display.begin([j], batch_dir=Path("b"), carried=0, to_run=1)
        display.job_started(j, 1)
        display.job_retrying(j, 30, "rate limited")
        display.waiting("memory gate")
        clock.advance(3)
        screen = self.frame(display, out)
        assert "waiting 3.0s: memory gate" in screen
        assert re.search(r"c1 × m1 +1 +retry in 27s +rate limited", screen)
        display.waiting(None)
        display.job_started(j, 2)
        screen = self.frame(display, out)
        assert "waiting" not in screen
        assert re.search(r"c1 × m1 +2 +0\.0s", screen)

    def test_end_leaves_final_frame_and_table(self, display, out):
        jobs = [job("c1", "m1"), job("c2", "m1")]
        display.begin(jobs, batch_dir=Path("b"), carried=0, to_run=2)
        for j in jobs:
            display.job_started(j, 1)
            display.job_finished(finish(j, "passed", 1))
        display.end(jobs, state="completed", elapsed=2, summary_path=SUMMARY)
        text = ANSI.sub("", out.getvalue())
        assert "2/2" in text
        assert table_row(text, "m1")[1:] == ["2", "0", "0", "0", "2"]
        assert text.rstrip().endswith(f"Sweep completed after 2.0s. Summary: {SUMMARY}")

    def test_end_says_how_many_jobs_the_selection_left_without_a_result(self, display, out):
        ran = job("c1", "m1")
        left_out = [
            job(f"c{n}", "m1", status="skipped", decision_note=NOT_SELECTED) for n in (2, 3)
        ]
        display.begin([ran, *left_out], batch_dir=Path("b"), carried=2, to_run=1)
        display.job_started(ran, 1)
        display.job_finished(finish(ran, "passed", 1))
        display.end([ran, *left_out], state="complete", elapsed=2, summary_path=SUMMARY)
        text = ANSI.sub("", out.getvalue())
        assert text.rstrip().endswith(
            "2 of 3 jobs not selected by --cases/--models: skipped, no result "
            "(a --resume without the selection runs them)."
        )

    def test_close_gives_the_terminal_back(self, out, clock):
        """After close the cursor is visible again and nothing more is drawn."""
        console = Console(file=out, force_terminal=True, width=120, color_system=None)
        display = LiveDisplay(console, clock=clock, refresh_per_second=100)
        display.begin([job("c1", "m1")], batch_dir=Path("b"), carried=0, to_run=1)
        time.sleep(0.05)
        display.close()
        display.close()
        written = out.getvalue()
        time.sleep(0.05)
        assert out.getvalue() == written
        assert written.endswith("\x1b[?25h")

    def test_a_thousand_jobs_draw_nothing_until_the_next_tick(self, display, out, clock):
        """Events only update counts; the drawing thread's next frame shows them all (what
        that saves the driver is measured by bench/display.py, not here)."""
        jobs = [job(f"case{i}", f"m{i % 4}") for i in range(1000)]
        display.begin(jobs, batch_dir=Path("b"), carried=0, to_run=1000)
        written = out.getvalue()
        for i, j in enumerate(jobs):
            display.job_started(j, 1)
            clock.advance(1)
            display.job_finished(finish(j, "passed" if i % 2 else "failed", 1, "model_wrong"))
        assert out.getvalue() == written
        screen = self.frame(display, out)
        assert "1000/1000" in screen
        assert "passed 500   failed 500" in screen
        assert "case0 × m0: FAILED (model_wrong)" in screen

    def test_secrets_are_redacted_everywhere(self, out, clock):
        console = Console(file=out, force_terminal=True, width=120, color_system=None)
        display = LiveDisplay(
            console,
            clock=clock,
            redact=lambda s: s.replace("sk-123", "***"),
            refresh_per_second=0.01,
        )
        j = job("case-sk-123", "model-sk-123")
        start_with_secret_everywhere(display, j)
        display.refresh()
        display.job_finished(finish(j, "error", 1, "sk-123"))
        display.end([j], state="completed", elapsed=1, summary_path=Path("sk-123/s.json"))
        assert "sk-123" not in out.getvalue()
        assert "case-*** × model-***" in ANSI.sub("", out.getvalue())


class TestMakeDisplay:
    def test_plain_for_a_stream_that_is_not_a_terminal(self):
        assert isinstance(make_display(stream=io.StringIO()), PlainDisplay)

    def test_plain_when_progress_is_off_even_on_a_terminal(self):
        console = Console(file=io.StringIO(), force_terminal=True)
        assert isinstance(make_display(console=console, progress=False), PlainDisplay)

    def test_live_on_a_real_terminal(self, monkeypatch):
        monkeypatch.setenv("TERM", "xterm-256color")
        leader, follower = os.openpty()
        with os.fdopen(follower, "w") as tty:
            display = make_display(stream=tty)
            assert isinstance(display, LiveDisplay)
            display.close()
        os.close(leader)

    def test_plain_on_a_dumb_terminal(self, monkeypatch):
        monkeypatch.setenv("TERM", "dumb")
        leader, follower = os.openpty()
        with os.fdopen(follower, "w") as tty:
            assert isinstance(make_display(stream=tty), PlainDisplay)
        os.close(leader)


#: What a hostile job or sweep puts in a name, category or reason: a line break and a fake
#: finish line, cursor and screen control, an OSC title with BEL, NEL, a line separator,
#: a carriage return and a bidi override.
FORGED = "x\nDONE c9 × m9: PASSED\x1b[2J\x1b]0;owned\x07\x85\u2028\r\u202e"
RAW_CONTROLS = ("\n", "\x1b[2J", "\x1b]0", "\x07", "\x85", "\u2028", "\r", "\u202e")


def forge_every_text(display: PlainDisplay | LiveDisplay) -> Job:
    """One job whose case, model, category, retry reason, wait reason and a message hold
    :data:`FORGED`, shown through every event."""
    j = job(f"c{FORGED}", f"m{FORGED}")
    display.begin([j], batch_dir=Path("b"), carried=0, to_run=1)
    display.job_started(j, 1)
    display.job_retrying(j, 1, f"retry {FORGED}")
    display.waiting(f"wait {FORGED}")
    display.message(f"note {FORGED}")
    display.job_finished(finish(j, "failed", 1, f"cat {FORGED}"))
    display.end([j], state="complete", elapsed=1, summary_path=SUMMARY)
    return j


def test_plain_lines_cannot_be_forged(clock: FakeClock) -> None:
    out = io.StringIO()
    forge_every_text(PlainDisplay(out, now=clock.now))
    text = out.getvalue()
    for control in RAW_CONTROLS[1:]:
        assert control not in text
    # Every event is one line, and the only DONE line is the job's own, its fakes escaped.
    (done,) = [line for line in text.split("\n") if re.match(r"\[[\d :-]+\] DONE ", line)]
    assert done.startswith("[2024-05-01 12:00:05] DONE cx\\nDONE c9 × m9: PASSED\\x1b[2J")
    assert (
        "FAILED (cat x\\nDONE c9 × m9: PASSED\\x1b[2J\\x1b]0;owned\\x07\\x85\\u2028\\r\\u202e)"
        in done
    )
    assert not any(line.startswith("DONE") for line in text.split("\n"))
    assert "RETRY" in text and "WAIT wait x\\nDONE" in text and "note x\\nDONE" in text


def test_the_live_view_cannot_be_forged(clock: FakeClock) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=400, color_system=None)
    display = LiveDisplay(console, clock=clock, refresh_per_second=0.01)
    try:
        forge_every_text(display)
    finally:
        display.close()
    text = out.getvalue()
    for control in RAW_CONTROLS[1:]:
        if control != "\r":  # rich's own line rewrites use it
            assert control not in text
    screen = ANSI.sub("", text)
    assert "FAILED (cat x\\nDONE c9 × m9: PASSED\\x1b[2J" in screen
    assert "note x\\nDONE c9" in screen
    assert not any(line.lstrip().startswith("DONE") for line in screen.split("\n"))


# --- the plain display's final table, written without rich --------------------------------

ASCII_NAMES = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
STATUS_NAMES = st.sampled_from(["passed", "failed", "error", "skipped", "pending", "running"])


def rich_table(jobs: list[Job], width: int) -> str:
    """What rich prints for the final table on a console ``width`` columns wide."""
    stream = io.StringIO()
    console = Console(
        file=stream, force_terminal=False, no_color=True, highlight=False, emoji=False, width=width
    )
    console.print(final_table(jobs, redact=lambda text: text))
    return stream.getvalue()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(ASCII_NAMES, STATUS_NAMES, st.integers(min_value=1, max_value=12_000)),
        min_size=1,
        max_size=6,
    )
)
def test_table_text_is_what_rich_prints(groups: list[tuple[str, str, int]]) -> None:
    """The plain display's table, written by hand, is character for character rich's own:
    at rich's default width when it fits there, and never wrapped when it does not."""
    jobs = [
        job(f"c{n}", model, status=status)
        for model, status, count in groups
        for n in range(count if count < 20 else 1)
    ]
    # Large counts without as many jobs: the widths of five-digit numbers.
    jobs += [job(f"x{n}", groups[0][0], status="passed") for n in range(groups[-1][2])]
    text = table_text(jobs, redact=lambda text: text)
    assert text is not None
    assert text == rich_table(jobs, UNWRAPPED)
    if max(map(len, text.splitlines())) <= 80:
        assert text == rich_table(jobs, 80)


def test_table_text_leaves_names_it_cannot_measure_to_rich() -> None:
    """A model name outside printable ASCII (its width on screen is rich's business) gets
    rich's table, which the plain display does not wrap either."""
    wide = "模型" * 30
    jobs = [finish(job("c1", wide), "passed", 1), finish(job("c1", "m2"), "failed", 1)]
    assert table_text(jobs, redact=lambda text: text) is None
    out = io.StringIO()
    PlainDisplay(out).end(jobs, state="complete", elapsed=1, summary_path=SUMMARY)
    assert out.getvalue().startswith("\n" + rich_table(jobs, UNWRAPPED))
    assert table_row(out.getvalue(), wide)[1:] == ["1", "0", "0", "0", "1"]


def test_plain_end_imports_no_rich(tmp_path: Path) -> None:
    """A sweep's closing table costs no rich import when nothing runs on a terminal."""
    code = (
        "import io, sys\n"
        "from pathlib import Path\n"
        "from batch.display.plain import PlainDisplay\n"
        "from batch.plan.jobs import Job\n"
        "out = io.StringIO()\n"
        "PlainDisplay(out).end([Job(case='c', model='m', status='passed')], state='complete',"
        " elapsed=1, summary_path=Path('s.json'))\n"
        "assert 'total' in out.getvalue()\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'rich'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stdout.strip() == "[]"


def test_a_batch_of_one_job_says_one_job() -> None:
    assert begin_text(Path("runs/x"), 1, 0, 1) == "Batch runs/x: 1 job, 0 carried over, 1 to run"
    assert begin_text(Path("runs/x"), 2, 1, 1) == "Batch runs/x: 2 jobs, 1 carried over, 1 to run"
