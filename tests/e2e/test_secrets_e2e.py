"""Secrets end to end: a key the jobs use never lands in a file or line the driver writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.fake_jobs import write_job_script
from helpers.paths import REPO_ROOT

FROM_ENVIRONMENT = "sk-live-e2e-0123456789abcdef"
IN_SWEEP_FILE = "tok-literal-9876543210"
SECRETS = (FROM_ENVIRONMENT, IN_SWEEP_FILE)

# The job shows the secrets every way a careless agent might: in its log, in result.json's
# extra keys and category, in an invalid outcome (which the driver quotes in its reason),
# and in a rate-limit error message.
JOB = """
    import json, os, sys

    key, token = os.environ["OPENAI_API_KEY"], os.environ["AUTH_TOKEN"]
    print(f"calling with {key} and {token}", flush=True)
    result = os.path.join(os.environ["BATCH_RUN_DIR"], "result.json")
    case = sys.argv[1]
    if case == "echo":
        json.dump({"outcome": "failed", "failure_category": key, "echo": [token, {key: 1}]},
                  open(result, "w"))
    elif case == "bad-outcome":
        json.dump({"outcome": key}, open(result, "w"))
    elif case == "rate-limited":
        print(f"HTTP 429 for key {key}")
        sys.exit(1)
"""

SWEEP = """\
name: secrets
cases: [plain, echo, bad-outcome, rate-limited]
models:
  - id: m/a
    env: {{AUTH_TOKEN: {token}, BASE_URL: "http://127.0.0.1:9/v1"}}
env: {{OPENAI_API_KEY: "${{MY_API_KEY}}"}}
command: [{python}, {script}, "{{case}}"]
summary_interval: 0s
"""


#: Under ``pytest -n`` the module's tests share one worker: its module fixture runs the
#: sweeps once, not again on each worker that gets one of the tests.
pytestmark = pytest.mark.xdist_group("secrets-sweep-run")


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A sweep run, then looked at with --resume, plan, status and stats; their outputs."""
    tmp_path = tmp_path_factory.mktemp("secrets")
    script = write_job_script(tmp_path, JOB)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        SWEEP.format(
            token=IN_SWEEP_FILE, python=json.dumps(sys.executable), script=json.dumps(str(script))
        )
    )
    root = str(REPO_ROOT)  # this tree, wherever pytest started
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "MY_API_KEY": FROM_ENVIRONMENT, "PYTHONPATH": path}
    outputs = []

    def batch(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "batch.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        outputs.extend([done.stdout, done.stderr])

    batch(str(sweep), "--no-progress")
    (batch_dir,) = (tmp_path / "runs").iterdir()
    batch(str(sweep), "--no-progress", "--retry-failed")
    batch("plan", str(sweep), "--resume")
    batch("status", str(batch_dir))
    batch("stats", str(batch_dir))
    return batch_dir, outputs


def driver_written(batch_dir: Path) -> list[Path]:
    """Every file under the batch dir but those the jobs wrote themselves."""
    return [
        path
        for path in batch_dir.rglob("*")
        if path.is_file() and path.name not in ("output.log", "result.json")
    ]


def test_the_jobs_really_had_the_secrets(sweep_run: tuple[Path, list[str]]) -> None:
    batch_dir, _ = sweep_run
    logs = [path.read_text() for path in batch_dir.rglob("output.log")]
    assert len(logs) >= 4
    assert all(FROM_ENVIRONMENT in log and IN_SWEEP_FILE in log for log in logs)


def test_no_file_the_driver_wrote_holds_a_secret(sweep_run: tuple[Path, list[str]]) -> None:
    batch_dir, _ = sweep_run
    files = driver_written(batch_dir)
    names = {path.name for path in files}
    assert {"sweep.yaml", "batch-summary.json", "events.jsonl", "run-meta.json"} <= names
    leaks = [
        (str(path.relative_to(batch_dir)), secret)
        for path in files
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    ]
    assert leaks == []


def test_the_drivers_output_holds_no_secret(sweep_run: tuple[Path, list[str]]) -> None:
    _, outputs = sweep_run
    assert any("bad-outcome" in text for text in outputs)
    assert [secret for text in outputs for secret in SECRETS if secret in text] == []


def test_the_snapshot_keeps_the_reference_and_redacts_the_literal(
    sweep_run: tuple[Path, list[str]],
) -> None:
    batch_dir, _ = sweep_run
    snapshot = (batch_dir / "sweep.yaml").read_text()
    assert "OPENAI_API_KEY: ${MY_API_KEY}" in snapshot
    assert "AUTH_TOKEN: '[REDACTED]'" in snapshot


def test_secrets_a_job_reports_are_redacted_in_its_record(
    sweep_run: tuple[Path, list[str]],
) -> None:
    batch_dir, _ = sweep_run
    records = {}
    for path in batch_dir.glob("*/*/run-meta.json"):
        record = json.loads(path.read_text())
        records.setdefault(record["test_case"], []).append(record)
    (echo,) = records["echo"]
    assert echo["failure_category"] == "[REDACTED]"
    assert echo["result"] == {"echo": ["[REDACTED]", {"[REDACTED]": 1}]}
    bad = records["bad-outcome"][-1]
    assert "outcome '[REDACTED]' is not one of" in bad["result"]["classification_error"]
    limited = records["rate-limited"][-1]
    assert limited["failure_category"] == "api_or_credit"
