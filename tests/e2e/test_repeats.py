"""Repeats through the CLI: every (case, model, repeat) a job with its own record, resumed
exactly per repeat, raised and lowered, retried only for a non-model failure, an old
ledger read as repeat 1, and the statistics a reader checks against a direct count."""

from __future__ import annotations

import json
import math
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.fake_jobs import wait_until

if TYPE_CHECKING:
    from conftest import BatchCli

#: The job: logs ``case model repeat attempt`` (and checks ``BATCH_REPEAT`` is ``{repeat}``),
#: then ends by a rule on the case and the repeat, from ``rules.json`` in the test's dir:
#: ``{"c1/2": "fail", "c2/1": "error-once", "c3/2": "hold"}``; anything else passes.
JOB = r"""
import json, os, sys, time
case, model, repeat, attempt, here = sys.argv[1:6]
assert os.environ["BATCH_REPEAT"] == repeat, (os.environ["BATCH_REPEAT"], repeat)
with open(os.path.join(here, "runs.log"), "a") as log:
    log.write(f"{case}\t{model}\t{repeat}\t{attempt}\n")
rules = json.load(open(os.path.join(here, "rules.json")))
rule = rules.get(f"{case}/{repeat}", "pass")
if rule == "hold":
    open(os.path.join(here, "holding"), "w").close()
    time.sleep(60)
if rule == "error-once":
    flag = os.path.join(here, f"erred-{case}-{repeat}")
    if not os.path.exists(flag):
        open(flag, "w").close()
        sys.exit(3)
sys.exit(1 if rule == "fail" else 0)
"""


def write_sweep(cli: BatchCli, rules: dict[str, str] | None = None, **keys: Any) -> Path:
    (cli.dir / "job.py").write_text(JOB, encoding="utf-8")
    (cli.dir / "rules.json").write_text(json.dumps(rules or {}), encoding="utf-8")
    sweep = {
        "output": "runs",
        "cases": ["c1", "c2", "c3"],
        "models": ["m"],
        "command": [
            sys.executable, "-S", str(cli.dir / "job.py"),
            "{case}", "{model}", "{repeat}", "{attempt}", str(cli.dir),
        ],
        **keys,
    }  # fmt: skip
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    return path


def runs(cli: BatchCli) -> list[tuple[str, str, int, int]]:
    """Every job started so far, (case, model, repeat, attempt), then forgotten."""
    log = cli.dir / "runs.log"
    if not log.exists():
        return []
    lines = log.read_text(encoding="utf-8").splitlines()
    log.unlink()
    return sorted((c, m, int(r), int(a)) for c, m, r, a in (line.split("\t") for line in lines))


def triples(cli: BatchCli, batch_dir: Path | None = None) -> Counter[tuple[str, str, int]]:
    """How many records each (case, model, repeat) has on disk."""
    return Counter((r["test_case"], r["model"], r.get("repeat", 1)) for r in cli.records(batch_dir))


def rows(cli: BatchCli) -> dict[tuple[str, int], str]:
    """(case, repeat) -> status, from the summary."""
    return {(row["case"], row.get("repeat", 1)): row["status"] for row in cli.summary()["jobs"]}


def every(repeats: range, cases: tuple[str, ...] = ("c1", "c2", "c3")) -> set[tuple[str, int]]:
    return {(case, repeat) for case in cases for repeat in repeats}


def test_a_repeats_sweep_killed_mid_run_resumes_only_the_repeats_without_a_record(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, {"c3/2": "hold", "c1/3": "fail"}, repeats=3)
    driver = cli.start(sweep, "--no-progress", "-j", "1")
    cli.wait_for(cli.dir / "holding")  # interleave: all of repeat 1, then c1/2, c2/2, c3/2
    batch_dir = cli.only_batch_dir()
    assert wait_until(lambda: len(cli.records(batch_dir)) == 5)
    driver.signal(signal.SIGKILL)
    driver.wait()
    before = runs(cli)
    assert [(c, r) for c, _, r, _ in before] == sorted(every(range(1, 2)) | every(range(2, 3)))
    (cli.dir / "rules.json").write_text(json.dumps({"c1/3": "fail"}), encoding="utf-8")

    result = cli.run(sweep, "--resume", "--no-progress")

    assert result.returncode == 0, result.stderr
    # Only the killed repeat (attempt 1 again: the killed run left no record) and repeat 3
    # of every case ran; every triple has exactly one record.
    assert runs(cli) == [("c1", "m", 3, 1), ("c2", "m", 3, 1), ("c3", "m", 2, 1), ("c3", "m", 3, 1)]
    assert triples(cli, batch_dir) == {(c, "m", r): 1 for c, r in every(range(1, 4))}
    assert rows(cli) == {
        key: "failed" if key == ("c1", 3) else "passed" for key in every(range(1, 4))
    }
    resumed = {(row["case"], row.get("repeat", 1)): row["resumed"] for row in cli.summary()["jobs"]}
    assert {key for key, carried in resumed.items() if not carried} == {
        ("c1", 3), ("c2", 3), ("c3", 2), ("c3", 3)
    }  # fmt: skip
    # The record says which repeat it is (repeat 1 writes none, as before repeats), and its
    # run dir is named for it.
    for record in cli.records(batch_dir):
        named = "-r" in record["run_dir"].rsplit("/", 1)[1]
        assert named == ("repeat" in record) == (record.get("repeat", 1) > 1), record


def test_raising_repeats_on_a_finished_batch_runs_only_the_new_repeats(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, repeats=2)
    assert cli.run(sweep, "--no-progress").returncode == 0
    assert len(runs(cli)) == 6

    plan = cli.run("plan", sweep, "--resume", "--repeats", "4", "--format", "json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["counts"] == {"run": 6, "carry": 6, "retry": 0}
    result = cli.run(sweep, "--resume", "--repeats", "4", "--no-progress")

    assert result.returncode == 0, result.stderr
    assert {(c, r) for c, _, r, _ in runs(cli)} == every(range(3, 5))
    assert set(rows(cli)) == every(range(1, 5))
    assert triples(cli) == {(c, "m", r): 1 for c, r in every(range(1, 5))}


def test_lowering_repeats_keeps_the_records_past_it_out_of_the_summary_and_plan_says_so(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, {"c1/3": "fail"}, repeats=3)
    assert cli.run(sweep, "--no-progress").returncode == 1 - 1  # a model failure exits 0
    runs(cli)

    plan = cli.run("plan", sweep, "--resume", "--repeats", "2")
    assert plan.returncode == 0, plan.stderr
    assert "m: 3 recorded runs of repeats past 2" in plan.stdout, plan.stdout
    result = cli.run(sweep, "--resume", "--repeats", "2", "--no-progress")

    assert result.returncode == 0, result.stderr
    assert runs(cli) == []
    assert set(rows(cli)) == every(range(1, 3))  # repeat 3 is in no row...
    assert len(triples(cli)) == 9  # ...and still on disk
    stats = json.loads(cli.run("stats", cli.only_batch_dir(), "--format", "json").stdout)
    assert stats["models"][0]["samples_per_case"] == {"min": 2, "max": 2}
    assert stats["models"][0]["flaky_cases"] == []  # c1's failed repeat 3 is left out


def test_retry_failed_reruns_the_repeat_that_met_an_infra_error_and_keeps_model_failures(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, {"c2/1": "error-once", "c1/2": "fail"}, repeats=2)
    first = cli.run(sweep, "--no-progress")
    assert first.returncode == 1, first.stderr  # an error job: exit 1
    assert rows(cli)[("c2", 1)] == "error" and rows(cli)[("c1", 2)] == "failed"
    runs(cli)

    result = cli.run(sweep, "--retry-failed", "--no-progress")

    assert result.returncode == 0, result.stderr
    # The same repeat number, the next attempt: a job seeding its sampling from the repeat
    # draws the same sample again.
    assert runs(cli) == [("c2", "m", 1, 2)]
    assert rows(cli)[("c2", 1)] == "passed"
    assert rows(cli)[("c1", 2)] == "failed"  # a sample the model failed stays
    assert triples(cli)[("c2", "m", 1)] == 2


def test_an_old_ledger_without_repeats_resumed_under_repeats_3_keeps_its_records_as_repeat_1(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, {"c3/1": "fail"})
    assert cli.run(sweep, "--no-progress").returncode == 0
    first = {r["run_dir"]: json.dumps(r) for r in cli.records()}
    assert all("repeat" not in json.loads(text) for text in first.values())
    runs(cli)
    write_sweep(cli, {"c3/1": "fail"}, repeats=3)

    result = cli.run(sweep, "--resume", "--no-progress")

    assert result.returncode == 0, result.stderr
    assert {(c, r) for c, _, r, _ in runs(cli)} == every(range(2, 4))
    assert rows(cli)[("c3", 1)] == "failed"
    # The old records are untouched and count as repeat 1.
    assert {r["run_dir"]: json.dumps(r) for r in cli.records() if r["run_dir"] in first} == first
    assert triples(cli) == {(c, "m", r): 1 for c, r in every(range(1, 4))}


def test_stats_of_repeats_match_a_direct_count(batch_cli: BatchCli) -> None:
    cli = batch_cli
    # c1 passes 2 of 4 (flaky), c2 all 4, c3 none: pass@k and pass^k by direct count.
    rules = {"c1/1": "fail", "c1/3": "fail", **{f"c3/{r}": "fail" for r in range(1, 5)}}
    sweep = write_sweep(cli, rules, repeats=4, models=["m", "n"])
    assert cli.run(sweep, "--no-progress").returncode == 0

    result = cli.run("stats", cli.only_batch_dir(), "--format", "json")

    document = json.loads(result.stdout)
    group = document["models"][0]
    passes = {"c1": 2, "c2": 4, "c3": 0}
    for k in range(1, 5):
        at = [1 - math.comb(4 - c, k) / math.comb(4, k) for c in passes.values()]
        hat = [math.comb(c, k) / math.comb(4, k) for c in passes.values()]
        assert group["pass_at_k"][str(k)]["estimate"] == round(sum(at) / 3, 6)
        assert group["pass_hat_k"][str(k)]["estimate"] == round(sum(hat) / 3, 6)
    assert list(group["pass_at_k"]) == ["1", "2", "3", "4"] and group["k_max"] == 4
    assert group["flaky_cases"] == ["c1"]
    assert group["flaky"] == [{"case": "c1", "passed": 2, "samples": 4}]
    # Both models ran the same jobs: their paired difference is exactly 0.
    assert document["paired"][0]["pass_rate_diff"]["estimate"] == 0.0
    table = cli.run("stats", cli.only_batch_dir()).stdout
    assert "m: flaky c1 (2/4)." in table
    assert "Paired comparisons" in table


def test_status_and_events_name_the_repeat_past_the_first(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, {"c2/2": "fail"}, repeats=2)
    assert cli.run(sweep, "--no-progress").returncode == 0
    batch_dir = cli.only_batch_dir()

    status = cli.run("status", batch_dir)

    assert "ledger:    6 (case, model, repeat) triples recorded" in status.stdout
    assert "  c2 \N{MULTIPLICATION SIGN} m #2: failed (model_failure): exit code 1" in status.stdout
    document = json.loads(cli.run("status", batch_dir, "--format", "json").stdout)
    assert document["max_repeat"] == 2
    assert [(r["case"], r.get("repeat", 1)) for r in document["not_passed"]] == [("c2", 2)]
    events = [json.loads(line) for line in (batch_dir / "batch-logs/events.jsonl").open()]
    finished = [(e["case"], e.get("repeat", 1)) for e in events if e["event"] == "finish"]
    assert sorted(finished) == sorted(every(range(1, 3)))
    # Repeat 1 is named as before repeats: no "repeat" key.
    starts = [e for e in events if e["event"] == "start"]
    assert sorted((e["case"], e.get("repeat", 1)) for e in starts) == sorted(every(range(1, 3)))
    assert all(e.get("repeat") != 1 for e in starts)
