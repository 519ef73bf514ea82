"""The ways a user starts the command: ``batch``, ``batch-ledger``, ``python -m batch``,
and shell completion (click's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def test_python_dash_m_batch_is_the_batch_command() -> None:
    result = _run([sys.executable, "-m", "batch", "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: batch [OPTIONS] COMMAND [ARGS]...")


def test_batch_ledger_is_a_second_name_for_the_same_command() -> None:
    result = _run([str(BIN / "batch-ledger"), "--help"])
    assert result.returncode == 0, result.stderr
    assert "batch check SWEEP" in result.stdout


def test_help_links_to_the_documentation_by_url() -> None:
    result = _run([str(BIN / "batch"), "--help"])
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("Documentation: https://"), result.stdout
    assert last.endswith("/docs")


def test_bash_completion_offers_commands_and_the_run_options_after_a_sweep() -> None:
    batch = str(BIN / "batch")
    commands = _run([batch], COMP_WORDS="batch st", COMP_CWORD="1", _BATCH_COMPLETE="bash_complete")
    assert commands.stdout.split() == ["plain,stats", "plain,status", "plain,steer"]
    # ``batch SWEEP`` is ``batch run SWEEP``: completion follows the same default command.
    options = _run(
        [batch], COMP_WORDS="batch x.yaml --re", COMP_CWORD="2", _BATCH_COMPLETE="bash_complete"
    )
    assert "plain,--resume" in options.stdout.split()
    assert "plain,--retry-failed" in options.stdout.split()
