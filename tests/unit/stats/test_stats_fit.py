"""``batch stats`` as a user reads it: the table fits a 100-column terminal, spend shows
only when jobs reported it, and ``--by case`` says why a job did not pass.

Everything here reads the command's rendered output (the text, JSON, CSV), never the code.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.builders import make_summary

from batch.cli import main
from batch.plan.jobs import Job
from batch.summary.write import write_summary

LONG = (
    "openrouter/meta-llama/llama-3.1-405b-instr",
    "anthropic/claude-3-5-sonnet-20241022-long",
    "ollama/qwen2.5-coder:32b-instruct-q4_K_M",
)
INTERVAL = re.compile(r"\d+\.\d% \(\d+\.\d-\d+\.\d\)")
STATUSES = ("passed", "failed", "error", "passed", "passed", "failed")
CATEGORY = {"failed": "model_failure", "error": "infra_failure"}


def write_batch(
    batch_dir: Path,
    models: tuple[str, ...] = LONG,
    cases: int = 6,
    *,
    usage: bool = False,
    reasons: bool = False,
    unfinished: bool = False,
) -> Path:
    """A summary as the driver writes it; rows carry ``usage`` and ``reason`` when asked,
    as the driver's rows do once jobs report them (docs/summary.md)."""
    jobs = []
    for m, model in enumerate(models):
        for c in range(cases):
            status = STATUSES[(c + m) % len(STATUSES)]
            if unfinished and c == cases - 1:
                status = "pending"
            jobs.append(
                Job(
                    case=f"c{c}",
                    model=model,
                    status=status,
                    failure_category=CATEGORY.get(status),
                    duration_seconds=None if status == "pending" else 10.0 + c,
                    attempts=1,
                    run_dir=f"{m}/c{c}",
                )
            )
    summary = make_summary(jobs, batch_id=batch_dir.name)
    for row in summary["jobs"]:
        if usage and not row["model"].startswith("local"):
            row["usage"] = {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.25}
        if reasons and row["status"] in ("failed", "error"):
            row["reason"] = f"timeout after 1m on {row['case']}"
    batch_dir.mkdir(parents=True, exist_ok=True)
    write_summary(batch_dir, summary)
    return batch_dir


def stats(*args: str, columns: int | None = 100) -> str:
    env = {"COLUMNS": str(columns)} if columns else {}
    result = CliRunner(env=env).invoke(main, ["stats", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def widest(text: str) -> int:
    from rich.cells import cell_len

    return max(cell_len(line) for line in text.splitlines())


class TestFitsTheTerminal:
    def test_100_columns_with_long_model_names(self, tmp_path: Path) -> None:
        out = stats(str(write_batch(tmp_path / "b", usage=True, unfinished=True)))
        assert widest(out) <= 100
        lines = out.splitlines()
        for model in LONG:  # every name whole, on its own table line
            assert any(line.strip().startswith(model + " ") for line in lines), model
        # Every rate shown with its interval on one line; nothing cut with an ellipsis.
        assert len(INTERVAL.findall(out)) == len(LONG) + 1
        assert "…" not in out
        note = out.replace("\n", " ").split("Left out to fit 100 columns: ")[1]
        assert set(note.split(" (batch stats --wide")[0].split(", ")) == {
            "Jobs",
            "Pass rate (95% CI)",
            "Mean",
            "Median",
            "Tokens",
            "Cost/pass",
            "Not run",
        }

    def test_failures_one_line_per_model_below_a_narrow_table(self, tmp_path: Path) -> None:
        out = stats(str(write_batch(tmp_path / "b")))
        below = out.split("Failures:\n")[1].splitlines()
        assert below == [
            f"  {LONG[0]}: model_failure 2, infra_failure 1",
            f"  {LONG[1]}: model_failure 2, infra_failure 1",
            f"  {LONG[2]}: model_failure 2, infra_failure 1",
            "  all jobs: model_failure 6, infra_failure 3",
        ]

    def test_a_name_longer_than_the_terminal_wraps_and_is_never_cut(self, tmp_path: Path) -> None:
        name = "provider/" + "x" * 60 + "/model-" + "y" * 40
        out = stats(str(write_batch(tmp_path / "b", models=(name, "m2"))))
        assert widest(out) <= 100
        assert "…" not in out
        # The name's pieces, read down the first column, are the whole name.
        lines = out.splitlines()
        rule = next(i for i, line in enumerate(lines) if line.strip().startswith("───"))
        table = lines[rule + 1 : lines.index("", rule)]
        column = "".join(line.split()[0] for line in table)
        assert name in column

    def test_narrower_than_the_narrowest_layout_widens_rather_than_cuts(
        self, tmp_path: Path
    ) -> None:
        out = stats(str(write_batch(tmp_path / "b", models=("m1", "m2"))), columns=40)
        (row,) = [line for line in out.splitlines() if line.strip().startswith("m1 ")]
        assert INTERVAL.search(row)  # the name and the whole interval on the row
        assert "…" not in out

    def test_wide_shows_every_column(self, tmp_path: Path) -> None:
        out = stats(str(write_batch(tmp_path / "b", usage=True)), "--wide")
        header = out.splitlines()[2]
        for column in ("Jobs", "Pass rate (95% CI)", "Mean", "Median", "Tokens", "Failures"):
            assert column in header
        assert widest(out) > 100
        assert "Left out" not in out

    def test_a_pipe_without_columns_gets_every_column(self, tmp_path: Path) -> None:
        out = stats(str(write_batch(tmp_path / "b")), columns=None)
        assert "Median" in out.splitlines()[2] and "Left out" not in out

    def test_compare_fits_too(self, tmp_path: Path) -> None:
        a = write_batch(tmp_path / "a", usage=True)
        b = write_batch(tmp_path / "b", usage=True, unfinished=True)
        out = stats(str(a), str(b))
        assert widest(out) <= 100
        assert "…" not in out
        assert "Δ cost" in out

    def test_a_real_terminal_of_100_columns(self, tmp_path: Path) -> None:
        """Through a pseudo-terminal sized 100 x 40, with no COLUMNS: the size is the
        terminal's own."""
        import fcntl
        import termios

        batch_dir = write_batch(tmp_path / "b", usage=True, unfinished=True)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        process = subprocess.Popen(
            [sys.executable, "-m", "batch", "stats", str(batch_dir)],
            stdout=slave,
            stderr=slave,
            stdin=slave,
            env=env | {"TERM": "xterm-256color"},
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        assert process.wait(timeout=60) == 0
        out = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode()).replace("\r\n", "\n")
        assert widest(out) <= 100
        assert all(any(line.strip().startswith(m + " ") for line in out.splitlines()) for m in LONG)
        assert len(INTERVAL.findall(out)) == len(LONG) + 1


class TestUsage:
    def test_no_usage_no_spend_anywhere(self, tmp_path: Path) -> None:
        batch_dir = str(write_batch(tmp_path / "b"))
        table = stats(batch_dir, "--wide")
        assert "Cost" not in table and "Tokens" not in table
        document = json.loads(stats(batch_dir, "--format", "json"))
        assert "cost_usd" not in document["overall"]
        assert "cost_usd" not in document["models"][0]
        header = stats(batch_dir, "--format", "csv").splitlines()[0]
        assert "cost_usd" not in header
        assert "Cost" not in stats(batch_dir, "--format", "markdown")

    def test_usage_in_every_format(self, tmp_path: Path) -> None:
        batch_dir = str(write_batch(tmp_path / "b", models=("m1", "local-m"), usage=True))
        table = stats(batch_dir, "--wide")
        assert "Tokens" in table and "Cost/pass" in table
        # m1: 6 jobs x $0.25 = $1.50 for 3 passes; the batch total is the same (local
        # reported nothing), and says how many jobs reported.
        (m1,) = [line for line in table.splitlines() if line.strip().startswith("m1 ")]
        assert "6,600" in m1 and "$1.50" in m1 and "$0.50" in m1
        assert "batch total $1.50" in table.replace("\n", " ")
        assert "6 of 12 jobs reported usage" in table.replace("\n", " ")
        document = json.loads(stats(batch_dir, "--format", "json"))
        assert document["overall"]["cost_usd"] == 1.5
        assert document["models"][0]["cost_per_passed_case"] == 0.5
        assert document["models"][1]["cost_usd"] is None
        rows = list(csv.DictReader(io.StringIO(stats(batch_dir, "--format", "csv"))))
        assert rows[0]["cost_usd"] == "1.5" and rows[0]["tokens"] == "6600"
        assert rows[1]["cost_usd"] == ""
        assert "| $1.50 |" in stats(batch_dir, "--format", "markdown")

    def test_compare_shows_the_cost_difference(self, tmp_path: Path) -> None:
        a = write_batch(tmp_path / "a", models=("m1",), usage=True)
        b = write_batch(tmp_path / "b", models=("m1",), cases=10, usage=True)
        table = stats(str(a), str(b), "--wide")
        (m1,) = [line for line in table.splitlines() if line.strip().startswith("m1 ")]
        assert "$1.50" in m1 and "$2.50" in m1 and "+$1.00" in m1
        document = json.loads(stats(str(a), str(b), "--format", "json"))
        assert document["overall"]["cost_usd_diff"] == 1.0
        rows = list(csv.DictReader(io.StringIO(stats(str(a), str(b), "--format", "csv"))))
        assert rows[0]["cost_usd_diff"] == "1.0"

    def test_compare_without_usage_has_no_cost(self, tmp_path: Path) -> None:
        a, b = write_batch(tmp_path / "a"), write_batch(tmp_path / "b")
        assert "cost" not in stats(str(a), str(b), "--wide").lower()
        assert (
            "cost_usd_diff" not in json.loads(stats(str(a), str(b), "--format", "json"))["overall"]
        )


class TestReasonsByCase:
    @pytest.fixture
    def batch_dir(self, tmp_path: Path) -> str:
        return str(write_batch(tmp_path / "b", models=("m1", "m2"), reasons=True))

    def test_table_lists_each_job_that_did_not_pass_with_its_reason(self, batch_dir: str) -> None:
        out = stats(batch_dir, "--by", "case")
        section = out.split("Jobs that did not pass: 6")[1]
        (line,) = [line for line in section.splitlines() if line.split()[:2] == ["c1", "m2"]]
        assert "error (infra_failure)" in line and "timeout after 1m on c1" in line

    def test_json_csv_and_markdown_carry_the_reason(self, batch_dir: str) -> None:
        document = json.loads(stats(batch_dir, "--by", "case", "--format", "json"))
        assert document["cases"][1]["not_passed"] == [
            {
                "model": "m1",
                "status": "failed",
                "failure_category": "model_failure",
                "reason": "timeout after 1m on c1",
            },
            {
                "model": "m2",
                "status": "error",
                "failure_category": "infra_failure",
                "reason": "timeout after 1m on c1",
            },
        ]
        assert document["cases"][3]["not_passed"] == []
        rows = list(
            csv.DictReader(io.StringIO(stats(batch_dir, "--by", "case", "--format", "csv")))
        )
        assert rows[1]["not_passed"] == (
            "m1: failed (model_failure): timeout after 1m on c1; "
            "m2: error (infra_failure): timeout after 1m on c1"
        )
        assert "timeout after 1m on c1" in stats(batch_dir, "--by", "case", "--format", "markdown")

    def test_narrow_by_case_leaves_failures_to_the_reasons_table(self, batch_dir: str) -> None:
        out = stats(batch_dir, "--by", "case", "--format", "table")
        assert "Failures:" not in out
        assert "Left out to fit 100 columns: " in out and "Failures" in out.split("Left out")[1]

    def test_a_row_without_reason_says_so(self, tmp_path: Path) -> None:
        out = stats(str(write_batch(tmp_path / "b", models=("m1",))), "--by", "case")
        (line,) = [line for line in out.splitlines() if line.split()[:2] == ["c1", "m1"]]
        assert line.split()[-1] == "—"


def write_repeats_batch(
    batch_dir: Path, models: tuple[str, ...] = ("mock/oracle", "mock/long-name-x")
) -> Path:
    """Three samples of eight cases per model, some flaky: every table of ``batch stats``
    (main, Repeats, Paired comparisons) is there."""
    jobs = [
        Job(
            case=f"c{c}",
            model=model,
            repeat=r,
            status="passed" if (c + r + m) % 3 else "failed",
            failure_category=None if (c + r + m) % 3 else "model_failure",
            duration_seconds=10.0,
            attempts=1,
            run_dir=f"{m}/c{c}-r{r}",
        )
        for m, model in enumerate(models)
        for c in range(8)
        for r in (1, 2, 3)
    ]
    summary = make_summary(jobs, batch_id=batch_dir.name)
    batch_dir.mkdir(parents=True)
    write_summary(batch_dir, summary)
    return batch_dir


def test_every_table_of_a_repeats_batch_fits_80_columns_by_leaving_columns_out(
    tmp_path: Path,
) -> None:
    """The Repeats and Paired comparisons tables, too, leave columns out to fit (they were
    printed whole, 136 and 97 columns wide), and say which."""
    out = stats(str(write_repeats_batch(tmp_path / "b")), columns=80)
    assert widest(out) <= 80, out
    assert "Repeats" in out and "Paired comparisons" in out
    assert "Left out to fit 80 columns: Samples/case, k, Flaky (" in out.replace("\n", " "), out
    wide = stats(str(tmp_path / "b"), "--wide", columns=80)
    assert "pass^k (95% CI)" in wide and "Samples/case" in wide and widest(wide) > 80
