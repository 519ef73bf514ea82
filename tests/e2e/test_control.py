"""``batch control`` through the CLI against a real driver: each control taken within a
second, said in the driver's output, written to events.jsonl; refusals exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.fake_jobs import wait_until

if TYPE_CHECKING:
    from conftest import BatchCli


def events(batch_dir: Path, kind: str) -> list[dict[str, Any]]:
    path = batch_dir / "batch-logs" / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def test_controls_steer_a_running_driver(batch_cli: BatchCli) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    sweep = cli.write_sweep(
        [f"c{n}" for n in range(1, 5)],
        before=[f"hold={gate}"],
        models=["a", "b", {"id": "fast", "adaptive": True, "max_concurrent": 4}],
        max_concurrent=1,
    )
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(
        lambda: bool(cli.batch_dirs()) and len(events(cli.only_batch_dir(), "start")) == 1, 10
    )
    batch_dir = cli.only_batch_dir()

    # `batch steer`; `batch control`, its earlier name, is still taken (below).
    paused = cli.run("steer", batch_dir, "pause")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith("taken: paused")
    assert cli.run("control", batch_dir, "concurrency", "2").stdout == "taken: max_concurrent 2\n"
    skipped = cli.run("control", batch_dir, "skip", "b")
    assert skipped.stdout == "taken: skipped 4 job(s) of b not started yet\n", skipped.stdout
    refused = cli.run("control", batch_dir, "concurrency", "fast", "3")
    assert refused.returncode == 2 and "fast is adaptive" in refused.stderr
    unknown = cli.run("control", batch_dir, "skip", "nobody")
    assert unknown.returncode == 2 and "no model 'nobody' in this sweep" in unknown.stderr
    bad = cli.run("control", batch_dir, "launch")
    assert bad.returncode == 2 and "unknown control 'launch'" in bad.stderr
    gate.unlink()  # the running job ends; paused, nothing else starts
    assert wait_until(lambda: len(events(batch_dir, "finish")) == 1, 10)
    starts = len(events(batch_dir, "start"))
    assert not wait_until(lambda: len(events(batch_dir, "start")) > starts, 1.5)

    assert cli.run("steer", batch_dir, "stop").returncode == 0
    assert driver.wait() == 130
    out = driver.stdout
    assert "control (batch control): paused" in out and "control refused: fast is adaptive" in out
    taken = [(e["action"], e["outcome"]) for e in events(batch_dir, "control")]
    assert taken[:3] == [("pause", "taken"), ("concurrency", "taken"), ("skip", "taken")]
    rows = cli.summary(batch_dir)["jobs"]
    assert {r["skip_reason"] for r in rows if r["model"] == "b"} == {
        "skipped by hand (batch control)"
    }
    assert cli.summary(batch_dir)["state"] == "interrupted"

    gone = cli.run("control", batch_dir, "pause")
    assert gone.returncode == 2 and "no driver is running this batch" in gone.stderr
    resumed = cli.run(sweep, "--resume", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert {r["status"] for r in cli.summary(batch_dir)["jobs"]} == {"passed"}


def held_driver(cli: BatchCli) -> tuple[Path, Path, Any]:
    """A driver whose first job waits on a gate (the test's to open): it keeps running."""
    gate = cli.dir / "gate"
    gate.touch()
    sweep = cli.write_sweep(["c1", "c2"], before=[f"hold={gate}"], max_concurrent=1)
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(
        lambda: bool(cli.batch_dirs()) and len(events(cli.only_batch_dir(), "start")) == 1, 10
    )
    return cli.only_batch_dir(), gate, driver


def test_a_directory_named_like_a_request_stops_no_request_after_it(batch_cli: BatchCli) -> None:
    cli = batch_cli
    batch_dir, gate, driver = held_driver(cli)
    control = batch_dir / "batch-logs" / "control"
    control.mkdir(exist_ok=True)
    (control / "00000000000000000000-a-dir.json").mkdir()  # sorts before every request

    # Was: "warning: controls: Is a directory" twice a second, and the stop never taken.
    stopped = cli.run("control", batch_dir, "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.startswith("taken: stopping")
    gate.unlink()
    assert driver.wait() == 130
    assert "warning: controls" not in driver.stdout
    assert (control / "00000000000000000000-a-dir.json").is_dir()  # not the driver's to remove


def test_a_refused_junk_file_does_not_answer_another_request(batch_cli: BatchCli) -> None:
    """A junk file taken in the same look as someone's pause, and refused first: its
    refusal names the junk file, and the pause gets its own answer."""
    cli = batch_cli
    batch_dir, gate, driver = held_driver(cli)
    control = batch_dir / "batch-logs" / "control"
    control.mkdir(exist_ok=True)
    junk = control / "00000000000000000000-junk.json"

    pausing = cli.start("control", batch_dir, "pause")
    # The junk lands the moment the pause request does (the driver looks twice a second):
    # both are taken in one look, the junk first.
    assert wait_until(lambda: any(control.glob("0*.json")), 10, interval=0.0005)
    junk.write_text("not a request")
    assert pausing.wait() == 0, pausing.stdout + pausing.stderr  # was: 2, "refused"
    assert pausing.stdout.startswith("taken: paused"), pausing.stdout
    answers = events(batch_dir, "control")
    refused = [e for e in answers if e["outcome"] == "refused"]
    assert [e["request"] for e in refused] == [junk.stem]
    (paused,) = [e for e in answers if e["outcome"] == "taken"]
    assert paused["action"] == "pause" and paused["request"] != junk.stem
    assert cli.run("steer", batch_dir, "stop").returncode == 0
    gate.unlink()
    assert driver.wait() == 130


def test_a_model_skipped_by_hand_then_stopped_says_so_for_its_jobs_that_never_came_up(
    batch_cli: BatchCli,
) -> None:
    """model-major: b's jobs are not queued yet when b is skipped; a stop then ends the
    sweep before their turn. They are skipped by hand all the same, and the summary says so
    (they were plain `skipped`, no reason)."""
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    sweep = cli.write_sweep(
        ["c1", "c2", "c3"],
        before=[f"hold={gate}"],
        models=["a", "b"],
        order="model-major",
        max_concurrent=1,
    )
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(
        lambda: bool(cli.batch_dirs()) and len(events(cli.only_batch_dir(), "start")) == 1
    )
    batch_dir = cli.only_batch_dir()
    skipped = cli.run("steer", batch_dir, "skip", "b")
    assert skipped.returncode == 0, skipped.stderr
    assert cli.run("steer", batch_dir, "stop").returncode == 0
    gate.unlink()
    assert driver.wait() == 130
    rows = {(r["case"], r["model"]): r for r in cli.summary(batch_dir)["jobs"]}
    for case in ("c1", "c2", "c3"):
        row = rows[(case, "b")]
        assert row["status"] == "skipped"
        assert row.get("skip_reason") == "skipped by hand (batch control)", row
