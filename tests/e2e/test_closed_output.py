"""A driver whose output reader goes away keeps running the sweep."""

from __future__ import annotations

import subprocess
import sys

from conftest import BatchCli


def test_sweep_completes_after_the_reader_of_its_output_goes_away(batch_cli: BatchCli) -> None:
    # `batch sweep.yaml | head -1` or a killed `tee`: the next progress line used to raise
    # BrokenPipeError, which stopped the sweep with the summary left saying "running".
    sweep = batch_cli.write_sweep(
        [f"c{i}" for i in range(6)], before=["sleep=0.2"], max_concurrent=2
    )
    driver = subprocess.Popen(
        [sys.executable, "-m", "batch.cli", str(sweep), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=batch_cli.dir,
    )
    assert driver.stdout is not None
    driver.stdout.readline()
    driver.stdout.close()  # the reader is gone
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 0, err.decode()
    summary = batch_cli.summary()
    assert summary["state"] == "complete"
    assert summary["totals"]["passed"] == 6
