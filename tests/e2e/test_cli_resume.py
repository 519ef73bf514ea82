"""The resume story through the real CLI: a driver dies mid-sweep, ``--resume`` reruns
exactly the jobs with no recorded outcome, ``--retry-failed`` exactly the non-model failures.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.fake_jobs import is_gone, read_pid, wait_until

if TYPE_CHECKING:
    from conftest import BatchCli

HELD = ("c4", "c5", "c6")


def write_story_sweep(cli: BatchCli) -> tuple[Path, Path]:
    """c1 passes, c2 fails (model), c3 errors once (infra), c4-c6 wait on a gate, c7-c8
    pass; three at a time, so c7 and c8 have not started while c4-c6 wait."""
    gate = cli.dir / "gate"
    gate.touch()
    cases: dict[str, list[str]] = {
        "c1": [],
        "c2": ["fail"],
        "c3": [f"flaky={cli.dir}/flaky-c3"],
        **{
            case: [
                f"pidfile={cli.dir}/pid-{case}",
                f"touch={cli.dir}/started-{case}",
                f"hold={gate}",
            ]
            for case in HELD
        },
        "c7": [],
        "c8": [],
    }
    sweep = cli.write_sweep(cases, max_concurrent=3, kill_grace="5s")
    return sweep, gate


def test_resume_after_sigkill_reruns_exactly_the_unrecorded_jobs(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep, gate = write_story_sweep(cli)

    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(*(cli.dir / f"started-{case}" for case in HELD))
    batch_dir = cli.only_batch_dir()
    assert wait_until(lambda: len(cli.records(batch_dir)) == 3)
    driver.signal(signal.SIGKILL)
    driver.wait()

    # The summary a dead driver left is whole, and says what it knew.
    summary = cli.summary(batch_dir)
    assert summary["state"] == "running"
    assert [row["case"] for row in summary["jobs"]] == [f"c{n}" for n in range(1, 9)]
    # Its jobs die with it: the watchdog stops them.
    pids = [read_pid(cli.dir / f"pid-{case}") for case in HELD]
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), timeout=10)
    assert cli.runs_counted() == ["c1", "c2", "c3", "c4", "c5", "c6"]

    gate.unlink()
    resumed = cli.run(sweep, "--resume", "--no-progress")

    assert resumed.returncode == 1, resumed.stderr  # c3's recorded error is carried
    assert cli.runs_counted() == ["c4", "c5", "c6", "c7", "c8"]
    assert "took over the lock of a dead driver" in resumed.stdout
    assert cli.batch_dirs() == [batch_dir]
    summary = cli.summary(batch_dir)
    assert summary["state"] == "complete"
    rows = {row["case"]: row for row in summary["jobs"]}
    assert {case: (row["status"], row["resumed"]) for case, row in rows.items()} == {
        "c1": ("passed", True),
        "c2": ("failed", True),
        "c3": ("error", True),
        **{f"c{n}": ("passed", False) for n in range(4, 9)},
    }
    recorded = {meta["test_case"]: meta for meta in cli.records(batch_dir)}
    for case in ("c1", "c2", "c3"):
        assert rows[case]["duration_seconds"] == round(recorded[case]["duration_seconds"], 3)
        assert rows[case]["run_dir"] == recorded[case]["run_dir"]
    assert summary["totals"] == {
        "passed": 6,
        "failed": 1,
        "error": 1,
        "skipped": 0,
        "pending": 0,
        "running": 0,
    }

    retried = cli.run(sweep, "--resume", "--retry-failed", "--no-progress")

    assert retried.returncode == 0, retried.stderr
    assert cli.runs_counted() == ["c3"]  # c2 failed on its own merits: kept
    statuses = cli.statuses(batch_dir)
    assert statuses == {"c2": "failed", **{f"c{n}": "passed" for n in range(1, 9) if n != 2}}
    c3 = next(row for row in cli.summary(batch_dir)["jobs"] if row["case"] == "c3")
    assert (c3["attempts"], c3["resumed"]) == (2, False)


def test_killed_runs_keep_their_run_dirs_but_get_no_record(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep, _ = write_story_sweep(cli)
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(*(cli.dir / f"started-{case}" for case in HELD))
    driver.signal(signal.SIGKILL)
    driver.wait()
    batch_dir = cli.only_batch_dir()

    status = cli.run("status", batch_dir, "--format", "json")

    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["state"] == "running"
    assert len(report["incomplete"]) == 3
    assert all("/c4-m-" in p or "/c5-m-" in p or "/c6-m-" in p for p in report["incomplete"])
    for rel in report["incomplete"]:
        assert (batch_dir / rel / "output.log").exists()
        assert not (batch_dir / rel / "run-meta.json").exists()
    assert report["recorded"] == {"passed": 1, "failed": 1, "error": 1}


def test_resume_without_a_value_takes_the_newest_batch_dir_of_this_sweep(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2"])
    other = cli.write_sweep(["c1", "c2"], file="other.yaml", name="other")
    assert cli.run(sweep, "--no-progress").returncode == 0
    # The newest batch dir of this sweep ran c1 only: c2 has no record there.
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    assert cli.run(other, "--no-progress").returncode == 0
    older, newer = (d for d in cli.batch_dirs() if d.name.startswith("batch-"))
    cli.runs_counted()

    resumed = cli.run(sweep, "--resume", "--no-progress")

    assert resumed.returncode == 0, resumed.stderr
    assert cli.runs_counted() == ["c2"]
    assert str(newer) in resumed.stdout
    assert cli.statuses(newer) == {"c1": "passed", "c2": "passed"}
    assert cli.statuses(older) == {"c1": "passed", "c2": "passed"}


def test_resume_of_a_named_batch_dir_uses_that_one(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2"])
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    assert cli.run(sweep, "--no-progress", "--cases", "c2").returncode == 0
    older, _ = cli.batch_dirs()
    cli.runs_counted()

    resumed = cli.run(sweep, "--resume", older, "--no-progress")

    assert resumed.returncode == 0, resumed.stderr
    assert cli.runs_counted() == ["c2"]
    assert cli.statuses(older) == {"c1": "passed", "c2": "passed"}


def test_resume_of_a_dir_that_is_not_a_batch_dir_is_a_usage_error(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1"])
    assert cli.run(sweep, "--no-progress").returncode == 0
    runs = cli.dir / "runs"
    before = sorted(runs.iterdir())

    # The output root, not one of its batch dirs: a slip that must not write into it.
    wrong = cli.run(sweep, "--resume", runs, "--no-progress")
    missing = cli.run(sweep, "--resume", runs / "nope", "--no-progress")

    assert wrong.returncode == 2
    assert f"{runs}: not a batch dir" in wrong.stderr
    assert missing.returncode == 2
    assert "no such batch dir" in missing.stderr
    assert sorted(runs.iterdir()) == before


def test_resume_before_the_sweep_file_does_not_take_it_as_the_batch_dir(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2"])
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    cli.runs_counted()

    plan = cli.run("plan", "--resume", "sweep.yaml", "--format", "json")
    resumed = cli.run("--resume", "sweep.yaml", "--no-progress")

    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["counts"] == {"run": 1, "carry": 1, "retry": 0}
    assert resumed.returncode == 0, resumed.stderr
    assert cli.runs_counted() == ["c2"]


def test_jobs_left_out_by_models_keep_their_recorded_result_in_the_summary(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"ok": [], "broken": ["exit=2"]}, models=["a", "b"])
    assert cli.run(sweep, "--no-progress").returncode == 1
    cli.runs_counted()

    retried = cli.run(sweep, "--retry-failed", "--models", "a", "--no-progress")

    assert retried.returncode == 1, retried.stderr
    assert cli.runs_counted() == ["broken"]
    rows = {(r["case"], r["model"]): r for r in cli.summary()["jobs"]}
    assert (rows["broken", "a"]["resumed"], rows["broken", "a"]["attempts"]) == (False, 2)
    # Left out by --models, so not retried: its recorded error stands; it is not "skipped".
    b = rows["broken", "b"]
    assert (b["status"], b["resumed"], b["failure_category"]) == ("error", True, "infra_failure")
    assert b["run_dir"] is not None and b["duration_seconds"] is not None
    assert rows["ok", "b"]["status"] == "passed"
    assert cli.summary()["totals"]["skipped"] == 0


# Prefixes of each other, names ending in digits, and two names with one safe name
# ("big v2" and "big-v2" both make "big-v2-<stamp>" dirs).
RELATED_SWEEPS = ("big", "big-v2", "big-2026", "big-2", "big v2")


def test_resume_without_a_value_never_takes_another_sweeps_batch_dir(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweeps = {
        name: cli.write_sweep(["c1", "c2"], file=f"{name.replace(' ', '_')}.yaml", name=name)
        for name in RELATED_SWEEPS
    }
    # Each sweep's own batch dir ran c1 only; "big" runs first and last, so its newest dir
    # is both older and newer than the others'.
    own: dict[str, Path] = {}
    for name in (*RELATED_SWEEPS, "big"):
        before = set(cli.batch_dirs())
        assert cli.run(sweeps[name], "--no-progress", "--cases", "c1").returncode == 0
        (own[name],) = set(cli.batch_dirs()) - before

    for name, sweep in sweeps.items():
        plan = cli.run("plan", sweep, "--resume", "--format", "json")
        assert plan.returncode == 0, plan.stderr
        assert json.loads(plan.stdout)["batch_dir"] == str(own[name]), name

    cli.runs_counted()
    retried = cli.run(sweeps["big"], "--retry-failed", "--no-progress")

    assert retried.returncode == 0, retried.stderr
    assert cli.runs_counted() == ["c2"]
    assert cli.statuses(own["big"]) == {"c1": "passed", "c2": "passed"}
    for name in RELATED_SWEEPS[1:]:
        assert cli.statuses(own[name]) == {"c1": "passed", "c2": "skipped"}, name
        assert not list((own[name] / "batch-logs").glob("sweep-*.yaml")), name


def test_resume_hint_names_only_this_sweeps_batch_dir(batch_cli: BatchCli) -> None:
    cli = batch_cli
    big = cli.write_sweep(["c1"], file="big.yaml", name="big")
    big_v2 = cli.write_sweep(["c1"], file="big-v2.yaml", name="big-v2")
    assert cli.run(big_v2, "--no-progress").returncode == 0
    runs = cli.dir / "runs"

    only_other = cli.run(big, "--resume", runs, "--no-progress")
    assert cli.run(big, "--no-progress").returncode == 0
    (own,) = (d for d in cli.batch_dirs() if d.name.startswith("big-2"))
    both = cli.run(big_v2, "--resume", runs, "--no-progress")

    assert only_other.returncode == 2
    assert only_other.stderr.strip().endswith(
        f"{runs}: not a batch dir (no batch-summary.json, sweep.yaml or batch-logs/)"
    )
    assert both.returncode == 2
    assert f"did you mean {own}?" not in both.stderr
    assert "did you mean" in both.stderr and "big-v2-" in both.stderr


def test_a_resume_under_a_changed_sweep_first_prints_what_changed(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2"], models=["mock/old", "mock/a"])
    assert cli.run(sweep, "--no-progress").returncode == 0
    batch_dir = cli.only_batch_dir()
    # A model added, one dropped, a case added, the command and the timeout changed.
    cli.write_sweep(
        ["c1", "c2", "c3"], models=["mock/a", "mock/new"], before=["print=v2"], timeout="5m"
    )
    changes = [
        "+ model mock/new (3 jobs)",
        "- model mock/old: 2 recorded runs kept, left out of the summary",
        "+ case c3 (2 jobs)",
        "command changed: carried results came from the old command",
    ]

    plan = cli.run("plan", sweep, "--resume")
    as_json = cli.run("plan", sweep, "--resume", "--format", "json")
    resumed = cli.run(sweep, "--resume", "--no-progress")
    again = cli.run(sweep, "--resume", "--no-progress")

    assert plan.returncode == 0, plan.stderr
    head = plan.stdout.splitlines()[:8]
    assert head[0] == "the sweep changed since this batch last ran:"
    assert head[1:5] == [f"  {line}" for line in changes]
    assert head[5].startswith("    was: ") and " print=v2 " not in head[5]
    assert head[6].startswith("    now: ") and " print=v2 '{params.a0}' " in head[6]
    assert head[7] == "  timeout changed: none → 300 s"
    assert json.loads(as_json.stdout)["changes"] == [line[2:] for line in head[1:]]
    assert resumed.returncode == 0, resumed.stderr
    out = resumed.stdout
    first_job = out.index("START")
    for line in changes:
        assert 0 <= out.index(f"  {line}") < first_job
    # The batch now records the changed sweep: resuming it again reports nothing.
    assert "the sweep changed" not in again.stdout
    assert len(list((batch_dir / "batch-logs").glob("sweep-*.yaml"))) == 1
    assert set(cli.statuses(batch_dir)) == {
        f"{case}|{model}" for case in ("c1", "c2", "c3") for model in ("mock/a", "mock/new")
    }
