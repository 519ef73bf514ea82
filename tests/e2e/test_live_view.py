"""The live view through the real CLI on a terminal (a pty of 100 by 30): what the window
shows while a sweep runs, after Ctrl-C once and twice, and for multi-step jobs on several
models."""

# The view joins case and model with U+00D7, as users see it.
# ruff: noqa: RUF001

from __future__ import annotations

import json
import re
import signal
import time
from typing import TYPE_CHECKING

from helpers.fake_jobs import fake_agent_command, wait_until
from helpers.terminal import TerminalDriver

if TYPE_CHECKING:
    from conftest import BatchCli


def view(lines: list[str]) -> list[str]:
    """The live view's newest frame: from its batch line to the end, or to the final table
    once the sweep is over."""
    # "Batch" alone: a batch dir's path too long for the line is printed on the next one.
    top = max(i for i, line in enumerate(lines) if line.split()[:1] == ["Batch"])
    end = next((i for i in range(top, len(lines)) if lines[i].split()[-1:] == ["jobs"]), len(lines))
    return lines[top:end]


def bar(frame: list[str]) -> str:
    (line,) = [line for line in frame if line.startswith("sweep ")]
    return line


def shows(driver: TerminalDriver, *texts: str, timeout: float = 15.0) -> list[str]:
    """The view once every one of ``texts`` is in it, and a whole frame later (it is
    redrawn 4 times a second, and the first sighting may be a frame half written)."""
    assert wait_until(
        lambda: all(any(t in line for line in view(driver.screen())) for t in texts), timeout
    ), "\n".join(driver.screen())
    time.sleep(0.6)
    return view(driver.screen())


def job_rows(frame: list[str]) -> list[str]:
    """Lines of the running table: a job, its attempt, then its time or retry wait."""
    return [line for line in frame if re.match(r"^\S+ × \S+ +\d+ +(retry in )?[\d.]+", line)]


def test_ctrl_c_leaves_no_eta_and_no_killed_or_retry_waiting_job_listed(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    held = {c: [f"touch={cli.dir}/started-{c}", f"hold={gate}"] for c in ("h1", "h2", "h3")}
    sweep = cli.write_sweep(
        {"h1": held["h1"], "h2": held["h2"], "r1": ["exit=2"], "h3": held["h3"], "w1": []},
        max_concurrent=3,
        retries=1,
        retry_backoff="10m",
        kill_grace="0.5s",
    )
    driver = cli.start_on_terminal(sweep)
    cli.wait_for(*(cli.dir / f"started-{case}" for case in held))
    frame = shows(driver, "waiting to retry 1")
    assert "ETA" in bar(frame)
    assert "running 3   waiting to retry 1" in "\n".join(frame)
    # Running jobs first, then those waiting for their retry.
    assert [row.split()[0] for row in job_rows(frame)] == ["h1", "h2", "h3", "r1"]

    driver.signal(signal.SIGINT)
    frame = shows(driver, "stopping")
    assert "ETA" not in bar(frame)
    # r1's retry will not happen in this run: it ends as it last did, an error.
    text = "\n".join(frame)
    assert "error 1   running 3" in text and "waiting to retry" not in text
    assert [row.split()[0] for row in job_rows(frame)] == ["h1", "h2", "h3"]

    driver.signal(signal.SIGINT)
    assert driver.wait() == 130
    lines = driver.screen()
    frame = view(lines)
    text = "\n".join(frame)
    assert "interrupted" in bar(frame) and "ETA" not in text
    assert "running 0" in text and job_rows(frame) == []
    for case in held:
        assert f"{case} × m: killed by the user's abort; left for --resume" in lines


def test_multi_step_jobs_on_several_models_show_their_step_and_each_models_progress(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    judge = fake_agent_command(f"touch={cli.dir}/judging-{{model}}", f"hold={gate}")
    sweep = cli.dir / "steps.yaml"
    sweep.write_text(
        json.dumps(
            {
                "output": "runs",
                "cases": ["c1", "c2"],
                "models": ["m1", "m2"],
                "steps": [
                    {"name": "eval", "command": fake_agent_command("pass")},
                    {"name": "judge", "command": judge},
                ],
                "max_concurrent": 2,
                "order": "interleave",
            }
        )
    )
    driver = cli.start_on_terminal(sweep)
    cli.wait_for(cli.dir / "judging-m1", cli.dir / "judging-m2")
    frame = shows(driver, "step judge")
    rows = job_rows(frame)
    assert len(rows) == 2 and all(row.endswith("step judge") for row in rows)
    models = {line.split()[0]: line.split()[1:] for line in frame if line.startswith("m")}
    # model: done/total, passed, failed, error, running
    assert models["model"] == ["done", "passed", "failed", "error", "running"]
    assert sum(int(models[m][4]) for m in ("m1", "m2")) == 2
    assert [models[m][0] for m in ("m1", "m2")] == ["0/2", "0/2"]

    gate.unlink()
    assert driver.wait() == 0
    frame = view(driver.screen())
    done = {line.split()[0]: line.split()[1:] for line in frame if line.startswith("m")}
    assert done["m1"] == done["m2"] == ["2/2", "2", "0", "0", "0"]
