"""Running ``scripts/*-local start``: the scripts that install and start what a test needs
(Slurm, podman) and print ``export NAME=VALUE`` lines on stdout for it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def run_start(script: Path, what: str, timeout: float, command: str = "start") -> dict[str, str]:
    """Run ``bash SCRIPT start`` (or another ``command`` that prints the same lines) and
    return what it exports (NAME → VALUE); when it fails or takes over ``timeout`` seconds,
    FAIL the test with its reason (never skip)."""
    name = f"scripts/{script.name} {command}"
    try:
        done = subprocess.run(
            ["bash", str(script), command],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} took over {timeout:.0f}s: {exc.stderr!r}")
    if done.returncode != 0:
        pytest.fail(
            f"{what} ({name} exited {done.returncode}):\n{done.stderr}{done.stdout}",
            pytrace=False,
        )
    exports = {}
    for line in done.stdout.splitlines():
        variable, _, value = line.removeprefix("export ").partition("=")
        if line.startswith("export ") and value:
            exports[variable] = value
    return exports


def run_stop(script: Path) -> None:
    """Run ``bash SCRIPT stop`` with this process's environment (its state dir variable):
    it ends exactly the daemons its ``start`` made there. A failure is not the test's."""
    subprocess.run(
        ["bash", str(script), "stop"],
        env=dict(os.environ),
        capture_output=True,
        timeout=60,
        check=False,
    )
