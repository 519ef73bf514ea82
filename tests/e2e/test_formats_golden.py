"""The files a sweep leaves behind stay the same, byte for byte, times and stamps aside.

A small fixed sweep runs through the real CLI — a passing, a failing and a rate-limited job,
a timeout, a run limited by ``--cases`` and then resumed (so two jobs are carried), and a
two-step sweep whose judge errors once and is retried from that step (the first step
reused) — and every ``run-meta.json``, ``batch-summary.json``, ``batch-logs/events.jsonl``,
the ``sweep.yaml`` snapshot and the command's output are compared, as text, with the files
in ``tests/data/golden/``: the same keys in the same order with the same values and the
same layout. What differs from run to run is masked first (:func:`normalise`): times and
stamps, durations, pids and the tmp dir's absolute path.

The test runs only ``python -m batch.cli`` and imports nothing of the package, so the same
file checks any version of the tree (it was run against the tree before the restructure).
To regenerate the golden files after an intended format change:
``BATCH_UPDATE_GOLDEN=1 .venv/bin/pytest tests/e2e/test_formats_golden.py`` — and say so
in the CHANGELOG.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN = REPO_ROOT / "tests" / "data" / "golden"
UPDATE = os.environ.get("BATCH_UPDATE_GOLDEN") == "1"

#: A job by its first argument; sh starts fast and is everywhere.
JOB_SH = """\
echo "job $1 starting"
case "$1" in
  pass) exit 0 ;;
  fail) exit 1 ;;
  ratelimit) echo "HTTP 429 rate limit exceeded"; exit 1 ;;
  sleep) exec sleep 60 ;;
  eval) echo '{"answer": 42}' > "$2/answer.json" ;;
  judge) if [ -e flaky-judge ]; then echo judged; else touch flaky-judge; exit 3; fi ;;
esac
"""

SWEEP = """\
name: golden
output: runs
cases:
  - {id: c1-pass, params: {action: pass}}
  - {id: c2-fail, params: {action: fail}}
  - {id: c3-ratelimit, params: {action: ratelimit}}
  - {id: c4-timeout, timeout: 1s, params: {action: sleep}}
models: [m1]
command: [sh, job.sh, "{params.action}"]
env: {API_TOKEN: "not-a-real-secret"}
kill_grace: 1s
max_concurrent: 1
"""

STEPS_SWEEP = """\
name: golden-steps
output: runs
cases: [s1]
models: [m1, {id: m2, max_concurrent: 1}]
steps:
  - name: eval
    command: [sh, job.sh, eval, "{run_dir}"]
    expect: [answer.json]
  - name: judge
    command: [sh, job.sh, judge, "{run_dir}"]
    timeout: 30s
max_concurrent: 1
order: model-major
"""

#: (pattern, replacement), applied in order to every file's text.
MASKS = [
    # ISO times: "2026-11-30T10:19:03.744512Z"
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),
    # stamps in batch dir and run dir names: 20261130T101903Z, 20261130T101903785895Z
    (re.compile(r"\d{8}T\d{6}(?:\d{6})?Z"), "<stamp>"),
    # (the summary's job rows are compact JSON: no space after the colon)
    (re.compile(r'("(?:duration_seconds|elapsed_seconds)": ?)-?[\d.e+-]+'), r"\1<seconds>"),
    (re.compile(r'("pid": )\d+'), r"\1<pid>"),
    # the snapshot's digest line: a hash over the data, whose output path is the tmp dir's
    (re.compile(r"(# digest: sha256 )[0-9a-f]{64}"), r"\1<sha256>"),
    # the command's output: clock times, durations
    (re.compile(r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\]"), "[<clock>]"),
    (re.compile(r"\b(in|after) \d+(?:\.\d+)?(ms|s|m)\b"), r"\1 <duration>"),
]


#: How the test runs batch, as the hints in its output repeat it.
PROGRAM = shlex.join([sys.executable, "-m", "batch.cli"])


def normalise(text: str, tmp: Path) -> str:
    # The hints repeat the program as it was run: here ``python -m batch.cli``.
    text = text.replace(PROGRAM + " ", "batch ").replace(str(tmp), "<tmp>")
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def batch(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "100", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args, "--no-progress"],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def batch_files(batch_dir: Path) -> list[Path]:
    """The formats under test, in a fixed order: snapshot, summary, events, records."""
    return [
        batch_dir / "sweep.yaml",
        batch_dir / "batch-summary.json",
        batch_dir / "batch-logs" / "events.jsonl",
        *sorted(batch_dir.glob("*/*/run-meta.json")),
    ]


def collect(tmp: Path, outputs: dict[str, str]) -> dict[str, str]:
    """Golden file name -> normalised text, for every batch dir and every command run."""
    found: dict[str, str] = {}
    for batch_dir in sorted((tmp / "runs").iterdir()):
        for path in batch_files(batch_dir):
            run_dir = path.parent.name if path.name == "run-meta.json" else ""
            parts = [batch_dir.name, path.parent.parent.name, run_dir, path.name]
            if path.name != "run-meta.json":
                parts = [batch_dir.name, path.name]
            name = normalise("--".join(parts), tmp).replace("<stamp>", "STAMP")
            found[name] = normalise(path.read_text(encoding="utf-8"), tmp)
    for name, text in outputs.items():
        found[name] = normalise(text, tmp)
    return found


def run_sweeps(tmp: Path) -> dict[str, str]:
    (tmp / "job.sh").write_text(JOB_SH, encoding="utf-8")
    (tmp / "sweep.yaml").write_text(SWEEP, encoding="utf-8")
    (tmp / "steps.yaml").write_text(STEPS_SWEEP, encoding="utf-8")
    runs = [
        ("1-selected", ["sweep.yaml", "--cases", "c1-pass", "--cases", "c2-fail"], 0),
        ("2-resumed", ["sweep.yaml", "--resume"], 1),
        ("3-steps", ["steps.yaml"], 1),
        ("4-steps-retried", ["steps.yaml", "--resume", "--retry-failed"], 0),
    ]
    outputs = {}
    for name, args, status in runs:
        done = batch(tmp, *args)
        assert done.returncode == status, (name, done.stdout, done.stderr)
        outputs[f"stdout-{name}.txt"] = done.stdout
        outputs[f"stderr-{name}.txt"] = done.stderr
    return collect(tmp, outputs)


def test_on_disk_formats_and_output_match_the_golden_files(tmp_path: Path) -> None:
    found = run_sweeps(tmp_path)

    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for old in GOLDEN.iterdir():
            old.unlink()
        for name, text in found.items():
            (GOLDEN / name).write_text(text, encoding="utf-8")
        pytest.fail("golden files rewritten; review `git diff tests/data/golden` and rerun")

    expected = {p.name: p.read_text(encoding="utf-8") for p in sorted(GOLDEN.iterdir())}
    assert sorted(found) == sorted(expected)
    for name, text in expected.items():
        assert found[name] == text, name
