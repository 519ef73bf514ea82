"""``batch SWEEP`` through the real CLI: exit statuses, limits observed from the jobs'
side, timeouts, automatic retries, awkward names, and the summary while it runs.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.fake_jobs import wait_until

from batch.execution.execute import MAX_BACKOFF, retry_delay

if TYPE_CHECKING:
    from conftest import BatchCli


def test_a_sweep_where_every_job_passes_exits_0_with_a_complete_summary(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2", "c3"], models=["openai/gpt-4o", "qwen3:8b"])

    result = cli.run(sweep, "--no-progress")

    assert result.returncode == 0, result.stderr
    summary = cli.summary()
    assert summary["state"] == "complete"
    assert summary["totals"]["passed"] == 6
    assert len(cli.records()) == 6
    for row in summary["jobs"]:
        assert (row["resumed"], row["attempts"]) == (False, 1)
        assert row["duration_seconds"] > 0
        assert f"{row['case']} \N{MULTIPLICATION SIGN} {row['model']}: PASSED" in result.stdout


def test_exit_status_is_1_when_a_job_ends_in_error_and_0_for_model_failures(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    only_model_failures = cli.write_sweep({"ok": [], "wrong": ["fail"]}, file="a.yaml")
    with_an_error = cli.write_sweep({"ok": [], "crash": ["exit=2"]}, file="b.yaml")

    assert cli.run(only_model_failures, "--no-progress", "-o", "a").returncode == 0
    assert cli.run(with_an_error, "--no-progress", "-o", "b").returncode == 1
    (a_dir,) = (cli.dir / "a").iterdir()
    (b_dir,) = (cli.dir / "b").iterdir()
    assert cli.statuses(a_dir) == {"ok": "passed", "wrong": "failed"}
    assert cli.statuses(b_dir) == {"ok": "passed", "crash": "error"}


def _intervals(stamp_file: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """(case, model) -> (first stamp, last stamp) of each job."""
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in stamp_file.read_text().splitlines():
        moment, case, model, _ = line.split("\t")
        seen[case, model].append(float(moment))
    return {key: (min(times), max(times)) for key, times in seen.items()}


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:  # an end sorts before a start at the same moment
        now += step
        most = max(most, now)
    return most


def test_per_model_and_overall_limits_hold_as_the_jobs_see_them(batch_cli: BatchCli) -> None:
    cli = batch_cli
    stamps = cli.dir / "stamps.txt"
    sweep = cli.write_sweep(
        [f"c{n}" for n in range(1, 5)],
        models=[{"id": "solo", "max_concurrent": 1}, {"id": "duo", "max_concurrent": 2}, "free"],
        before=(f"stamp={stamps}", "sleep=0.3", f"stamp={stamps}"),
        max_concurrent=4,
    )

    assert cli.run(sweep, "--no-progress").returncode == 0

    intervals = _intervals(stamps)
    assert len(intervals) == 12
    by_model: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (_, model), interval in intervals.items():
        by_model[model].append(interval)
    assert _most_at_once(by_model["solo"]) == 1
    # The limits are reached, not merely respected by running one job at a time.
    assert _most_at_once(by_model["duo"]) == 2
    assert _most_at_once(list(intervals.values())) == 4


def test_stagger_spaces_job_starts(batch_cli: BatchCli) -> None:
    cli = batch_cli
    stamps = cli.dir / "stamps.txt"
    sweep = cli.write_sweep(
        ["c1", "c2", "c3", "c4"], before=(f"stamp={stamps}",), max_concurrent=4, stagger="0.4s"
    )

    assert cli.run(sweep, "--no-progress").returncode == 0

    # Seen by the jobs (half the stagger allowed for process start-up jitter on a busy
    # machine; without a stagger they start within milliseconds) and in the ledger.
    seen = sorted(start for start, _ in _intervals(stamps).values())
    assert all(later - earlier > 0.2 for earlier, later in pairwise(seen))
    recorded = sorted(
        datetime.fromisoformat(meta["timestamp"].replace("Z", "+00:00")).timestamp()
        for meta in cli.records()
    )
    assert all(later - earlier >= 0.39 for earlier, later in pairwise(recorded))


def test_a_job_that_ignores_sigterm_is_killed_after_its_timeout_and_grace(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        {"stuck": ["ignore-term", "sleep=30"]}, timeout="0.5s", kill_grace="0.5s"
    )

    result = cli.run(sweep, "--no-progress", timeout=20)

    assert result.returncode == 1
    (meta,) = cli.records()
    assert (meta["outcome"], meta["failure_category"], meta["stop_reason"]) == (
        "error",
        "infra_failure",
        "timeout",
    )
    assert meta["exit_code"] == -9  # SIGTERM ignored; SIGKILL after the grace
    assert 0.9 < meta["duration_seconds"] < 5


def test_non_model_failures_are_retried_with_doubling_backoff_each_in_its_own_run_dir(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        {
            "flaky": [f"flaky={cli.dir}/flaky"],
            "broken": ["exit=3"],
            "wrong": ["fail"],
        },
        retries=2,
        retry_backoff="0.2s",
    )

    result = cli.run(sweep, "--no-progress")

    assert result.returncode == 1  # "broken" stays an error after its retries
    assert cli.runs_counted() == ["broken"] * 3 + ["flaky"] * 2 + ["wrong"]
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    assert {case: (row["status"], row["attempts"]) for case, row in rows.items()} == {
        "flaky": ("passed", 2),
        "broken": ("error", 3),
        "wrong": ("failed", 1),
    }
    broken = sorted(
        (meta for meta in cli.records() if meta["test_case"] == "broken"),
        key=lambda meta: meta["attempt"],
    )
    assert [meta["attempt"] for meta in broken] == [1, 2, 3]
    assert len({meta["run_dir"] for meta in broken}) == 3
    assert all(meta["run_dir"].endswith(f"-a{meta['attempt']}") for meta in broken)
    assert rows["broken"]["run_dir"] == broken[-1]["run_dir"]
    events = [
        json.loads(line)
        for line in (cli.only_batch_dir() / "batch-logs" / "events.jsonl").read_text().splitlines()
    ]
    delays = [e["delay_seconds"] for e in events if e["event"] == "retry" and e["case"] == "broken"]
    assert delays == [0.2, 0.4]
    gaps = [
        _moment(later["timestamp"]) - _moment(earlier["finished_at"])
        for earlier, later in pairwise(broken)
    ]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4


def _moment(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_retry_backoff_doubles_and_stops_at_one_hour() -> None:
    assert [retry_delay(30, n) for n in (1, 2, 3)] == [30, 60, 120]
    assert retry_delay(30, 20) == MAX_BACKOFF == 3600


AWKWARD_CASES = [
    "a/b",
    "../../outside",
    "with space",
    'it\'s "quoted"',
    "$(touch pwned)",
    "`touch pwned`",
    "ünïcødé-日本",
]
AWKWARD_MODELS = ["openai/gpt-4o", "qwen3:8b", "../model; rm -rf x", "modèle 'ü'"]


def _tree(root: Path, skip: Path) -> set[Path]:
    return {p for p in root.rglob("*") if skip not in p.parents and p != skip}


def test_awkward_names_reach_the_job_verbatim_and_no_file_lands_outside(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        AWKWARD_CASES, models=AWKWARD_MODELS, before=("record", "{case}", "{model}")
    )
    before = _tree(cli.dir, cli.dir / "runs")

    result = cli.run(sweep, "--no-progress", "-j", "4")

    assert result.returncode == 0, result.stderr + result.stdout
    batch_dir = cli.only_batch_dir()
    after = _tree(cli.dir, cli.dir / "runs") - before
    assert {p.name for p in after} <= {"count.txt"}
    assert not (Path.cwd() / "pwned").exists()
    seen = sorted(batch_dir.glob("*/*/agent-seen.json"))
    assert len(seen) == len(AWKWARD_CASES) * len(AWKWARD_MODELS)
    pairs = set()
    for path in seen:
        # Every run dir is two levels under the batch dir, whatever the names were.
        assert path.parent.parent.parent == batch_dir
        job = json.loads(path.read_text())
        case, model = job["env"]["BATCH_CASE"], job["env"]["BATCH_MODEL"]
        assert job["argv"][2:4] == [case, model]
        meta = json.loads((path.parent / "run-meta.json").read_text())
        assert (meta["test_case"], meta["model"]) == (case, model)
        pairs.add((case, model))
    assert pairs == {(c, m) for c in AWKWARD_CASES for m in AWKWARD_MODELS}
    rows = {(row["case"], row["model"]) for row in cli.summary(batch_dir)["jobs"]}
    assert rows == pairs
    assert all(os.path.realpath(p).startswith(str(batch_dir)) for p in batch_dir.rglob("*"))


def test_the_summary_is_written_at_start_and_as_jobs_finish(batch_cli: BatchCli) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    sweep = cli.write_sweep(
        {
            "quick": [],
            "held": [f"touch={cli.dir}/started-held", f"hold={gate}"],
            "later": [],
        },
        max_concurrent=2,
        summary_interval="0.1s",
    )
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(cli.dir / "started-held")

    def statuses() -> dict[str, str]:
        try:
            return cli.statuses()
        except (AssertionError, FileNotFoundError, ValueError):
            return {}

    # While "held" runs, the summary already says "quick" and "later" passed.
    assert wait_until(
        lambda: statuses() == {"quick": "passed", "held": "running", "later": "passed"}
    )
    assert cli.summary()["state"] == "running"
    assert cli.summary()["finished_at"] is None
    gate.unlink()
    assert driver.wait() == 0
    assert cli.summary()["state"] == "complete"
    assert cli.summary()["finished_at"] is not None


def test_summary_rewrites_wait_for_summary_interval(batch_cli: BatchCli) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    sweep = cli.write_sweep(
        {"quick": [], "held": [f"touch={cli.dir}/started-held", f"hold={gate}"]},
        max_concurrent=2,
        summary_interval="1h",
    )
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(cli.dir / "started-held")
    batch_dir = cli.only_batch_dir()
    assert wait_until(lambda: len(cli.records(batch_dir)) == 1)

    # Only the summary written at start exists: finishes inside the interval wait for it.
    assert cli.statuses() == {"quick": "pending", "held": "pending"}
    gate.unlink()
    assert driver.wait() == 0
    assert cli.statuses() == {"quick": "passed", "held": "passed"}


def test_a_selection_says_how_many_jobs_it_left_without_a_result(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2", "c3"])
    note = "jobs not selected by --cases/--models: skipped, no result"

    new = cli.run(sweep, "--no-progress", "--cases", "c1")
    batch_dir = cli.only_batch_dir()
    resumed = cli.run(sweep, "--resume", "--no-progress", "--cases", "c2")
    after_selection = (cli.summary(batch_dir)["state"], cli.statuses(batch_dir))
    completed = cli.run(sweep, "--resume", "--no-progress")

    # A selection is what was asked for: exit 0 and `complete`, new batch or resumed, and
    # the closing lines say what is still missing.
    assert new.returncode == 0, new.stderr
    assert f"2 of 3 {note}" in new.stdout
    assert resumed.returncode == 0, resumed.stderr
    assert f"1 of 3 {note}" in resumed.stdout
    assert after_selection == ("complete", {"c1": "passed", "c2": "passed", "c3": "skipped"})
    assert completed.returncode == 0, completed.stderr
    assert note not in completed.stdout
    assert cli.statuses(batch_dir) == {"c1": "passed", "c2": "passed", "c3": "passed"}
