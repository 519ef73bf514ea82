"""Hostile and odd input through the real command line.

Broken sweep files stop ``batch SWEEP`` with exit 2, one located line and nothing written.
Odd names (``/``, ``:``, ``..``, quotes, ``$(...)``, ``;``, 200 characters, non-ASCII) reach
the job verbatim, stay inside the batch dir and resume by identity. Records that are
foreign, truncated, huge or of the wrong types never crash ``--resume``, ``plan``,
``status`` or ``stats``, and neither do damaged summaries.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.bad_sweeps import BAD_SWEEPS, BROKEN
from helpers.builders import write_record
from helpers.fake_jobs import fake_agent_command
from helpers.paths import REPO_ROOT

from batch.cli import main
from batch.stats.render import markdown_escape
from run_support import jsonio


def batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _run_cli(args, cwd, text=True)


def batch_raw(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``batch(...)`` with stdout and stderr decoded as strict UTF-8 and nothing translated,
    so a stray ``\r`` or an undecodable byte in the output is seen as it is."""
    result = _run_cli(args, cwd, text=False)
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def _run_cli(args: tuple[str, ...], cwd: Path, *, text: bool) -> subprocess.CompletedProcess:
    root = str(REPO_ROOT)  # this tree, wherever pytest started
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args],
        capture_output=True,
        text=text,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        timeout=120,
    )


def files_under(directory: Path) -> set[Path]:
    return set(directory.rglob("*"))


def flow(values: list[str]) -> str:
    """A YAML flow list of ``values``, each quoted (JSON strings are YAML strings)."""
    return "[" + ", ".join(json.dumps(value, ensure_ascii=False) for value in values) + "]"


# --- broken sweep files -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_sweep_is_one_located_line_exit_2_and_nothing_written(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BATCH_LEDGER_TEST_UNSET_VARIABLE", raising=False)
    before = files_under(BAD_SWEEPS)
    path = BAD_SWEEPS / name
    location, fragment = BROKEN[name]

    result = CliRunner().invoke(main, [str(path), "-o", str(tmp_path / "runs"), "--no-progress"])

    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{path}:{location}: ")
    assert fragment in line
    assert files_under(BAD_SWEEPS) == before
    assert list(tmp_path.iterdir()) == []


def test_a_missing_sweep_file_is_one_line_exit_2(tmp_path: Path) -> None:
    result = batch("no-such-sweep.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "no-such-sweep.yaml: cannot read the sweep file: No such file or directory"
    ]
    assert list(tmp_path.iterdir()) == []


# --- odd names, end to end ----------------------------------------------------------------

ODD_CASES = [
    "a/b",
    "x:y",
    "..",
    "../../escape",
    "with space",
    "quo'te\"s",
    "$(touch pwned)",
    "; touch pwned2 #",
    "n" * 200,
    "é-ünï-日本",
]
ODD_MODELS = ["provider/model:tag", "../../../etc"]


@pytest.fixture(scope="module")
def odd_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A sweep of odd names run once by ``batch``; (sweep dir, batch dir, driver output)."""
    root = tmp_path_factory.mktemp("odd")
    command = [*fake_agent_command("record", "exit=0"), "{case}", "{model}"]
    (root / "sweep.yaml").write_text(
        f"cases: {flow(ODD_CASES)}\nmodels: {flow(ODD_MODELS)}\ncommand: {flow(command)}\n",
        encoding="utf-8",
    )
    result = batch("sweep.yaml", "--no-progress", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    (batch_dir,) = (root / "runs").iterdir()
    return root, batch_dir, result.stdout


def test_odd_names_reach_each_job_verbatim(odd_sweep: tuple[Path, Path, str]) -> None:
    _, batch_dir, _ = odd_sweep
    seen = sorted(
        tuple(json.loads(path.read_text())["argv"][-2:])
        for path in batch_dir.glob("*/*/agent-seen.json")
    )
    assert seen == sorted((case, model) for case in ODD_CASES for model in ODD_MODELS)


def test_odd_names_write_nothing_outside_the_batch_dir(odd_sweep: tuple[Path, Path, str]) -> None:
    root, batch_dir, _ = odd_sweep
    outside = [
        path
        for path in files_under(root)
        if not path.resolve().is_relative_to(batch_dir.resolve())
        and path not in (root / "sweep.yaml", root / "runs")
    ]
    assert outside == []
    for run_dir in batch_dir.glob("*/*/"):
        assert run_dir.resolve().parent.parent == batch_dir.resolve()
    # Jobs run with the sweep's dir as cwd: a shell would have made "pwned" files there.
    assert not any(path.name.startswith("pwned") for path in files_under(root))


def test_odd_names_are_the_ledgers_identity_and_resume_by_it(
    odd_sweep: tuple[Path, Path, str],
) -> None:
    root, batch_dir, _ = odd_sweep
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    rows = {(row["case"], row["model"]): row["status"] for row in summary["jobs"]}
    assert rows == {(case, model): "passed" for case in ODD_CASES for model in ODD_MODELS}

    resumed = batch("sweep.yaml", "--resume", "--no-progress", cwd=root)
    assert resumed.returncode == 0
    assert "20 jobs, 20 carried over, 0 to run" in resumed.stdout
    assert len(list(batch_dir.glob("*/*/run-meta.json"))) == 20
    for command in (["status", str(batch_dir)], ["stats", str(batch_dir)]):
        assert batch(*command, cwd=root).returncode == 0


# --- hostile records and summaries --------------------------------------------------------

HUGE = 50 * 1024 * 1024

#: name -> what the run-meta.json holds (dict/list: as JSON; str/bytes: verbatim).
HOSTILE_RECORDS: dict[str, object] = {
    "truncated": '{"schema": 1, "test_case": "c1", "model": "m/one", "outcome": "pas',
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "json-list": [1, 2, 3],
    "json-null": "null",
    "json-string": '"passed"',
    "deep-nesting": "[" * 100_000,
    "nan-duration": '{"test_case": "c1", "model": "m/one", "outcome": "passed", '
    '"duration_seconds": NaN}',
    "wrong-identity-types": {"test_case": 5, "model": ["m/one"], "outcome": "passed"},
    "wrong-outcome-type": {"test_case": "c2", "model": "m/one", "outcome": {"passed": True}},
    "wrong-field-types": {
        "test_case": "c2",
        "model": "m/one",
        "outcome": "failed",
        "failure_category": 7,
        "timestamp": 12,
        "duration_seconds": "n/a",
        "attempt": "two",
        "result": [1, 2],
        "run_dir": 7,
        "exit_code": "x",
        "steps": "no",
    },
    "surrogate-identity": '{"test_case": "c1\\ud800", "model": "m/one", "outcome": "passed"}',
    "surrogate-category": '{"test_case": "c2", "model": "m/one", "outcome": "failed", '
    '"failure_category": "x\\udc80"}',
    "foreign-harness": {"test_case": "c3", "model": "m/one", "intercepted": True, "extra": {}},
    "foreign-infra": {"test_case": "c4", "model": "m/one", "infra_failure": True},
    "not-in-sweep": {"test_case": "zz", "model": "m/one", "outcome": "passed"},
    "huge-valid": "",  # filled in below: a 50 MB record
    "huge-garbage": b"x" * HUGE,
}


def make_hostile_batch(root: Path) -> Path:
    """c1..c4 x m/one: only c1 has a sound record, beside every kind of hostile one."""
    command = flow(fake_agent_command("exit=0"))
    (root / "sweep.yaml").write_text(
        f"cases: [c1, c2, c3, c4, c5]\nmodels: [m/one]\ncommand: {command}\n"
    )
    batch_dir = root / "runs" / "batch-20261130T031500Z"
    write_record(batch_dir, "c1", "m/one", outcome="passed", at=0)
    for index, (name, raw) in enumerate(HOSTILE_RECORDS.items(), start=1):
        if name == "huge-valid":
            head = '{"test_case": "c5", "model": "m/one", "outcome": "passed", "result": '
            raw = f'{head}{{"log": "{"y" * HUGE}"}}}}'
        write_record(batch_dir, "c1", "m/one", dir_name=f"{name}-a{index}", raw=raw, at=index)
    (batch_dir / "m--one" / "a-dir-record").mkdir()
    (batch_dir / "m--one" / "a-dir-record" / "run-meta.json").mkdir()
    (batch_dir / "batch-logs").mkdir()
    return batch_dir


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hostile")
    return root, make_hostile_batch(root)


def test_plan_reads_hostile_records_without_crashing(hostile: tuple[Path, Path]) -> None:
    root, batch_dir = hostile
    result = batch("plan", "sweep.yaml", "--resume", str(batch_dir), "--format", "json", cwd=root)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    decisions = {job["case"]: job["decision"] for job in plan["jobs"]}
    # c1 and c5 have sound records (c5's is 50 MB); the foreign shapes of c3 (intercepted)
    # and c4 (infra_failure) are read as other harnesses mean them; c2 has only records
    # whose outcome cannot be trusted, so it runs again.
    assert decisions == {"c1": "carry", "c2": "run", "c3": "carry", "c4": "carry", "c5": "carry"}
    unreadable = {Path(item["path"]).parent.name.rsplit("-a", 1)[0] for item in plan["unreadable"]}
    assert unreadable >= {
        "truncated", "empty", "binary", "json-list", "json-null", "json-string", "deep-nesting",
        "wrong-identity-types", "wrong-outcome-type", "wrong-field-types", "huge-garbage",
        "a-dir-record", "surrogate-identity", "surrogate-category",
    }  # fmt: skip


def test_status_and_stats_report_hostile_records_without_crashing(
    hostile: tuple[Path, Path],
) -> None:
    root, batch_dir = hostile
    status = batch("status", str(batch_dir), "--format", "json", cwd=root)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["summary_error"] == "no batch-summary.json"
    assert len(report["unreadable"]) >= 12
    stats = batch("stats", str(batch_dir), cwd=root)
    assert stats.returncode == 2
    (line,) = stats.stderr.splitlines()
    assert "batch-summary.json" in line


def test_resume_runs_past_hostile_records(hostile: tuple[Path, Path]) -> None:
    root, batch_dir = hostile
    result = batch("sweep.yaml", "--resume", str(batch_dir), "--no-progress", cwd=root)
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    assert "warning: unreadable record" in result.stdout
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    rows = {row["case"]: (row["status"], row["resumed"]) for row in summary["jobs"]}
    assert rows == {
        "c1": ("passed", True), "c2": ("passed", False), "c3": ("passed", True),
        "c4": ("error", True), "c5": ("passed", True),
    }  # fmt: skip
    assert batch("stats", str(batch_dir), cwd=root).returncode == 0


HOSTILE_SUMMARIES: dict[str, bytes] = {
    "truncated": b'{"schema": 1, "jobs": [{"case": "c1", "mod',
    "empty": b"",
    "a-list": b"[]",
    "jobs-not-a-list": b'{"jobs": {"c1": "passed"}}',
    "rows-of-wrong-types": b'{"jobs": [1, "x", null, {"case": 5, "model": [], "status": {}}]}',
    "unknown-status": b'{"jobs": [{"case": "c1", "model": "m", "status": "exploded", '
    b'"duration_seconds": "n/a"}]}',
    "totals-not-an-object": b'{"jobs": [{"case": "c1", "model": "m", "status": "passed"}], '
    b'"totals": [1, 2]}',
    "state-a-list": b'{"jobs": [], "state": ["complete"], "batch_id": {"x": 1}}',
    "nan-durations": b'{"elapsed_seconds": NaN, "jobs": [{"case": "c1", "model": "m", '
    b'"status": "passed", "duration_seconds": NaN}, {"case": "c2", "model": "m", "status": '
    b'"failed", "duration_seconds": Infinity}, {"case": "c3", "model": "m", "status": '
    b'"passed", "duration_seconds": 1' + b"0" * 400 + b"}]}",
    "surrogate-case": b'{"jobs": [{"case": "c\\ud800", "model": "m", "status": "passed"}]}',
    "category-a-list": b'{"jobs": [{"case": "c1", "model": "m", "status": "failed", '
    b'"failure_category": ["x"]}]}',
    "huge": b'{"jobs": ['
    + b'{"case": "c", "model": "m", "status": "passed"},' * 1_000_000
    + b'{"case": "c", "model": "m", "status": "passed"}]}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SUMMARIES))
def test_status_and_stats_survive_a_hostile_summary(name: str, tmp_path: Path) -> None:
    batch_dir = tmp_path / "batch-20261130T031500Z"
    write_record(batch_dir, "c1", "m", outcome="passed")
    (batch_dir / "batch-summary.json").write_bytes(HOSTILE_SUMMARIES[name])
    runner = CliRunner()
    commands = [["status"], ["stats"]]
    if name != "huge":  # its size is for status and stats; the others read the same way
        commands += [["stats", "--by", "case"], ["report"]]
    for command in commands:
        result = runner.invoke(main, [*command, str(batch_dir)])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{command}: {result.exception!r}"
        )
        assert result.exit_code in (0, 2)
        if result.exit_code == 2:
            (line,) = result.stderr.splitlines()
            assert "batch-summary.json" in line


# --- output that cannot be forged ---------------------------------------------------------

#: What a job puts in its category and detail: a line break and a fake finish line, screen
#: and title control (ESC, OSC, BEL), NEL, a line separator, a carriage return and a bidi
#: override. Jobs and hand-edited files can hold any of these; the terminal must see none.
FORGED = "x\nDONE c9 × m9: PASSED\x1b[2J\x1b]0;owned\x07\x85\u2028\r\u202e"  # noqa: RUF001
RAW_CONTROLS = ("\x1b", "\x07", "\x85", "\u2028", "\r", "\u202e")
FORGED_SHOWN = "x\\nDONE c9 × m9: PASSED\\x1b[2J\\x1b]0;owned\\x07\\x85\\u2028\\r\\u202e"  # noqa: RUF001


def assert_unforged(text: str) -> None:
    """No raw control character reached ``text``, and no line of it starts a fake DONE."""
    for control in RAW_CONTROLS:
        assert control not in text, f"raw {control!r} in output"
    assert not any(line.lstrip().startswith("DONE") for line in text.split("\n"))


@pytest.fixture(scope="module")
def forged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A sweep run once whose jobs report :data:`FORGED` as category and detail, under a
    case id holding ESC and a bidi override; (sweep dir, batch dir, plain run output)."""
    root = tmp_path_factory.mktemp("forged")
    result = json.dumps(
        {
            "outcome": "failed",
            "failure_category": f"cat {FORGED}",
            "detail": FORGED,
            "reason": FORGED,
        }
    )
    braces = result.replace("{", "{{").replace("}", "}}")  # literal, not placeholders
    command = json.dumps(fake_agent_command(f"result={braces}"))
    cases = json.dumps(["c1", "c\x1b[31mred\u202e"])  # ASCII escapes: valid YAML strings
    (root / "sweep.yaml").write_text(f"cases: {cases}\nmodels: [m1]\ncommand: {command}\n")
    run = batch_raw("sweep.yaml", "--no-progress", cwd=root)
    assert run.returncode == 0, run.stderr
    (batch_dir,) = (root / "runs").iterdir()
    return root, batch_dir, run.stdout


def test_a_job_cannot_forge_a_line_of_the_plain_run_output(
    forged: tuple[Path, Path, str],
) -> None:
    _, batch_dir, output = forged
    assert_unforged(output)
    stamped = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] (DONE .*)")
    done = sorted(m[1] for m in map(stamped.fullmatch, output.split("\n")) if m)
    # The job's reason is one line: its line breaks are spaces, its controls escaped.
    why = "result.json says failed: x DONE c9 × m9: PASSED\\x1b[2J\\x1b]0;owned\\x07 \\u202e"  # noqa: RUF001
    assert [line.split(") in ")[0] for line in done] == [
        f"DONE c1 × m1: FAILED (cat {FORGED_SHOWN}; {why}",  # noqa: RUF001
        f"DONE c\\x1b[31mred\\u202e × m1: FAILED (cat {FORGED_SHOWN}; {why}",  # noqa: RUF001
    ]
    # The record keeps what the job wrote, exactly: escaping is for the terminal only.
    records = [json.loads(p.read_text()) for p in batch_dir.glob("*/*/run-meta.json")]
    assert {r["failure_category"] for r in records} == {f"cat {FORGED}"}
    assert {r["result"]["detail"] for r in records} == {FORGED}
    # The record's reason is the one line the terminal shows.
    assert {r["reason"] for r in records} == {why}


@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize("by", ["model", "case"])
def test_stats_tables_show_hostile_text_escaped(
    forged: tuple[Path, Path, str], fmt: str, by: str
) -> None:
    root, batch_dir, _ = forged
    for source in ("summary", "records"):
        result = batch_raw(
            "stats", str(batch_dir), "--format", fmt, "--by", by, "--source", source, cwd=root
        )
        assert result.returncode == 0, result.stderr
        assert_unforged(result.stdout)
        shown = FORGED_SHOWN if fmt == "table" else markdown_escape(FORGED)
        assert f"cat {shown} 2" in result.stdout or f"cat {shown} 1" in result.stdout


def test_stats_csv_and_json_stay_valid_data_holding_the_text_as_written(
    forged: tuple[Path, Path, str],
) -> None:
    root, batch_dir, _ = forged
    as_json = batch_raw("stats", str(batch_dir), "--format", "json", "--by", "case", cwd=root)
    document = json.loads(as_json.stdout)
    assert [row["case"] for row in document["cases"]] == ["c1", "c\x1b[31mred\u202e"]
    assert document["overall"]["failure_categories"] == {f"cat {FORGED}": 2}
    as_csv = batch_raw("stats", str(batch_dir), "--format", "csv", "--by", "case", cwd=root)
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout, newline="")))
    assert [row["case"] for row in rows] == ["c1", "c\x1b[31mred\u202e"]
    assert [row[f"failure_categories.cat {FORGED}"] for row in rows] == ["1", "1"]


def test_status_and_plan_show_hostile_text_escaped(forged: tuple[Path, Path, str]) -> None:
    root, batch_dir, _ = forged
    summary_path = batch_dir / "batch-summary.json"
    summary = json.loads(summary_path.read_text())
    summary_path.write_text(json.dumps({**summary, "state": FORGED}))
    bad_dir = f"bad{FORGED}"
    write_record(batch_dir, "c1", "m1", dir_name=bad_dir, raw=json.dumps({"outcome": FORGED}))
    try:
        status = batch_raw("status", str(batch_dir), cwd=root)
        assert status.returncode == 0, status.stderr
        assert_unforged(status.stdout)
        assert f"summary:   {FORGED_SHOWN} — " in status.stdout
        assert f"m1/bad{FORGED_SHOWN}/run-meta.json: " in status.stdout
        as_json = json.loads(
            batch_raw("status", str(batch_dir), "--format", "json", cwd=root).stdout
        )
        assert as_json["state"] == FORGED
        plan = batch_raw("plan", "sweep.yaml", "--resume", str(batch_dir), cwd=root)
        assert plan.returncode == 0, plan.stderr
        assert_unforged(plan.stdout)
        assert "c\\x1b[31mred\\u202e" in plan.stdout
        assert f"unreadable record m1/bad{FORGED_SHOWN}/run-meta.json" in plan.stdout
    finally:
        summary_path.write_text(json.dumps(summary))
        shutil.rmtree(batch_dir / "m1" / bad_dir)


# --- text that is not valid Unicode, numbers past 64 bits ---------------------------------


def test_a_job_reporting_lone_surrogates_and_huge_numbers_is_recorded_not_a_crash(
    tmp_path: Path,
) -> None:
    """A detail with half an emoji (``\\ud83d``, as Python's json writes a cut string) and an
    integer past 64 bits are recorded exactly as the job wrote them; a category that is not
    text makes the result.json invalid (error), as a category of the wrong type does."""
    detail = '{"outcome": "failed", "detail": "cut \\ud83d", "n": 1234567890123456789012345}'
    category = '{"outcome": "failed", "failure_category": "x\\udc80"}'
    cases = "".join(
        f"  - {{id: {case}, params: {{r: {json.dumps(text)}}}}}\n"
        for case, text in (("detail", detail), ("category", category))
    )
    command = json.dumps(fake_agent_command("result={params.r}"))
    (tmp_path / "sweep.yaml").write_text(f"cases:\n{cases}models: [m]\ncommand: {command}\n")
    run = batch_raw("sweep.yaml", "--no-progress", cwd=tmp_path)
    assert "Traceback" not in run.stderr
    assert run.returncode == 1, run.stderr  # the invalid category is an error
    (batch_dir,) = (tmp_path / "runs").iterdir()
    records = {
        (meta := jsonio.loads(path.read_bytes()))["test_case"]: meta
        for path in batch_dir.glob("*/*/run-meta.json")
    }
    assert records["detail"]["outcome"] == "failed"
    assert records["detail"]["result"] == {
        "detail": "cut \ud83d",
        "n": 1234567890123456789012345,
    }
    assert records["category"]["outcome"] == "error"
    assert (
        "failure_category is not valid Unicode text"
        in (records["category"]["result"]["classification_error"])
    )
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    assert {row["case"]: row["status"] for row in summary["jobs"]} == {
        "category": "error",
        "detail": "failed",
    }
    resumed = batch_raw("sweep.yaml", "--resume", "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 1 and "2 carried over, 0 to run" in resumed.stdout


def test_the_hostile_summaries_named_in_issue_11_are_a_message_or_a_missing_value(
    tmp_path: Path,
) -> None:
    """totals not an object: unreadable summary; NaN/infinite/too large durations: missing;
    a lone surrogate in a case id: unreadable summary, naming the job."""
    runner = CliRunner()

    def run(name: str, *command: str) -> Any:
        batch_dir = tmp_path / name
        write_record(batch_dir, "c1", "m", outcome="passed")
        (batch_dir / "batch-summary.json").write_bytes(HOSTILE_SUMMARIES[name])
        return runner.invoke(main, [command[0], str(batch_dir), *command[1:]])

    status = run("totals-not-an-object", "status")
    assert status.exit_code == 0
    assert (
        "summary:   unreadable batch-summary.json: 'totals' is a list, not an object or null"
        in (status.stdout)
    )
    report = run("nan-durations", "report")
    assert report.exit_code == 0, report.output
    stats = run("nan-durations", "stats", "--format", "json")
    assert stats.exit_code == 0, stats.output
    overall = json.loads(stats.stdout)["overall"]
    assert (overall["passed"], overall["failed"], overall["mean_duration_seconds"]) == (2, 1, None)
    by_case = run("surrogate-case", "stats", "--by", "case")
    assert by_case.exit_code == 2
    assert by_case.stderr.splitlines() == [
        f"{tmp_path / 'surrogate-case' / 'batch-summary.json'}: job 0: 'case' is not valid "
        "Unicode text (a lone surrogate)"
    ]


def test_an_error_line_stays_one_line_whatever_the_path_holds(tmp_path: Path) -> None:
    batch_dir = tmp_path / f"b{FORGED}"
    write_record(batch_dir, "c1", "m", outcome="passed")
    for command in ("stats", "report"):
        result = CliRunner().invoke(main, [command, str(batch_dir)])
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        assert_unforged(line)
        assert line.startswith(f"{tmp_path}/b{FORGED_SHOWN}/batch-summary.json: ")


def test_run_dirs_whose_names_are_not_utf8_are_listed_escaped_in_any_locale(
    tmp_path: Path,
) -> None:
    """A job may create a run dir named with bytes that are not UTF-8; status and plan list
    it (escaped in tables, as ``\\u`` escapes in JSON) instead of failing on a strict stdout
    (CliRunner's, like a terminal's under en_US.UTF-8)."""
    batch_dir = tmp_path / "batch-20261130T031500Z"
    write_record(batch_dir, "c1", "m", outcome="passed")
    write_record(batch_dir, "c1", "m", dir_name=os.fsdecode(b"bad\xff"), raw="{")
    killed = os.fsdecode(b"killed\xfe")
    (batch_dir / "m" / killed).mkdir()
    (batch_dir / "m" / killed / "output.log").write_text("started\n")
    (tmp_path / "sweep.yaml").write_text("cases: [c1]\nmodels: [m]\ncommand: [python]\n")
    runner = CliRunner()
    status = runner.invoke(main, ["status", str(batch_dir)])
    assert status.exit_code == 0, status.output
    assert "  m/killed\\udcfe\n" in status.stdout
    assert "  m/bad\\udcff/run-meta.json: not valid JSON" in status.stdout
    as_json = runner.invoke(main, ["status", str(batch_dir), "--format", "json"])
    assert as_json.exit_code == 0, repr(as_json.exception)
    assert json.loads(as_json.stdout)["incomplete"] == [f"m/{killed}"]
    for fmt in ("table", "json"):
        plan = runner.invoke(
            main,
            ["plan", str(tmp_path / "sweep.yaml"), "--resume", str(batch_dir), "--format", fmt],
        )
        assert plan.exit_code == 0, repr(plan.exception)
        assert "bad\\udcff" in plan.stdout
