"""Usage in the ledger through the real CLI: real jobs report what they spent in
``result.json`` (``run_support.results.write_result(..., usage=...)``), and the record, the
summary row and the ``finish`` event keep it — each step's own spend summed, a retried
job's attempts added up, a carried job's total kept, a timed-out job's spend still counted
(docs/usage.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from conftest import BatchCli

#: A job that reports usage with write_result. argv: ACTION [STATE_FILE]. ``flaky`` reports
#: an infra error the first time (a flag file marks it) and a pass the next.
JOB = """\
import sys, time
from run_support.results import write_result

action = sys.argv[1]
if action == "spend":
    write_result(None, "passed", score=0.9,
                 usage={"input_tokens": 1200, "output_tokens": 300, "requests": 2,
                        "cost_usd": 0.0125})
elif action == "flaky":
    import os
    flag = sys.argv[2]
    if not os.path.exists(flag):
        open(flag, "w").close()
        write_result(None, "error", "api_or_credit", usage={"requests": 3, "cost_usd": 0.1})
        sys.exit(2)
    write_result(None, "passed", usage={"requests": 1, "cost_usd": 0.2, "input_tokens": 50})
elif action == "slow":
    write_result(None, "passed", usage={"input_tokens": 700, "cost_usd": 0.05})
    print("waiting for the model", flush=True)
    time.sleep(30)
elif action == "bad":
    write_result(None, "passed",
                 usage={"input_tokens": "lots", "output_tokens": 10, "cost_usd": -1,
                        "cache_read_tokens": 5})
elif action == "quiet":
    pass
"""

#: eval and judge both spend: each writes result.json with its own usage.
EVAL = """\
import json, os, sys
run_dir = os.environ["BATCH_RUN_DIR"]
with open(os.path.join(run_dir, "answer.json"), "w") as f:
    json.dump({"answer": 42}, f)
with open(os.path.join(run_dir, "result.json"), "w") as f:
    json.dump({"outcome": "passed",
               "usage": {"input_tokens": 1000, "output_tokens": 200, "requests": 1,
                         "cost_usd": 0.01}}, f)
"""
JUDGE = """\
from run_support.results import write_result
write_result(None, "failed", "model_failure", reason="the judge says 42 is wrong",
             usage={"input_tokens": 400, "output_tokens": 50, "requests": 1, "cost_usd": 0.02})
"""


def write_sweep(cli: BatchCli, cases: dict[str, dict[str, Any]], **keys: Any) -> Path:
    (cli.dir / "job.py").write_text(JOB)
    sweep = {
        "output": "runs",
        "cases": [{"id": case, **fields} for case, fields in cases.items()],
        "models": ["m"],
        "command": [sys.executable, "job.py", "{params.action}", "{params.arg}"],
        "kill_grace": "1s",
        **keys,
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    return path


def case(action: str, arg: str = "-", **fields: Any) -> dict[str, Any]:
    return {"params": {"action": action, "arg": arg}, **fields}


def newest_records(cli: BatchCli) -> dict[str, dict[str, Any]]:
    """case -> its newest record (highest attempt)."""
    newest: dict[str, dict[str, Any]] = {}
    for record in cli.records():
        held = newest.get(record["test_case"])
        if held is None or record["attempt"] > held["attempt"]:
            newest[record["test_case"]] = record
    return newest


def events(cli: BatchCli, name: str) -> list[dict[str, Any]]:
    path = cli.only_batch_dir() / "batch-logs" / "events.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [event for event in lines if event["event"] == name]


def rows(cli: BatchCli) -> dict[str, dict[str, Any]]:
    return {row["case"]: row for row in cli.summary()["jobs"]}


SPEND = {"input_tokens": 1200, "output_tokens": 300, "requests": 2, "cost_usd": 0.0125}


def test_a_job_reporting_usage_has_it_in_its_record_row_and_finish_event(
    batch_cli: BatchCli,
) -> None:
    sweep = write_sweep(batch_cli, {"c1": case("spend"), "c2": case("quiet")})
    done = batch_cli.run(sweep, "--no-progress")
    assert done.returncode == 0, done.stderr

    records = newest_records(batch_cli)
    assert records["c1"]["usage"] == SPEND
    assert records["c1"]["usage_total"] == SPEND
    # usage is the ledger's key, not one of the job's result keys.
    assert records["c1"]["result"] == {"score": 0.9}
    # A job that reported nothing has no usage keys at all (not zeros).
    assert "usage" not in records["c2"] and "usage_total" not in records["c2"]
    assert rows(batch_cli)["c1"]["usage"] == SPEND
    assert "usage" not in rows(batch_cli)["c2"]
    finish = {event["case"]: event for event in events(batch_cli, "finish")}
    assert finish["c1"]["usage"] == SPEND and finish["c1"]["usage_total"] == SPEND
    assert "usage" not in finish["c2"]


def test_each_step_reports_its_own_usage_and_the_record_sums_them(batch_cli: BatchCli) -> None:
    cli = batch_cli
    (cli.dir / "eval.py").write_text(EVAL)
    (cli.dir / "judge.py").write_text(JUDGE)
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "output": "runs",
                "cases": ["c1"],
                "models": ["m"],
                "steps": [
                    {"name": "eval", "command": [sys.executable, "eval.py"]},
                    {"name": "judge", "command": [sys.executable, "judge.py"]},
                ],
            }
        )
    )
    done = cli.run(sweep, "--no-progress")
    assert done.returncode == 0, done.stderr  # a model failure is not an error

    (record,) = cli.records()
    steps = {step["name"]: step for step in record["steps"]}
    assert steps["eval"]["usage"] == {
        "input_tokens": 1000,
        "output_tokens": 200,
        "requests": 1,
        "cost_usd": 0.01,
    }
    assert steps["judge"]["usage"] == {
        "input_tokens": 400,
        "output_tokens": 50,
        "requests": 1,
        "cost_usd": 0.02,
    }
    both = {"input_tokens": 1400, "output_tokens": 250, "requests": 2, "cost_usd": 0.03}
    assert record["usage"] == both and record["usage_total"] == both
    assert rows(cli)["c1"]["usage"] == both
    assert (record["outcome"], record["reason"]) == (
        "failed",
        "result.json says failed: the judge says 42 is wrong",
    )


def test_a_retried_jobs_total_adds_its_attempts_and_a_resume_carries_it(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    flag = cli.dir / "failed-once"
    sweep = write_sweep(cli, {"c1": case("flaky", str(flag))}, retries=1, retry_backoff="0s")
    done = cli.run(sweep, "--no-progress")
    assert done.returncode == 0, done.stderr

    first, second = sorted(cli.records(), key=lambda record: record["attempt"])
    # The failed attempt's spend is spend: the retry's total includes it.
    assert first["usage"] == first["usage_total"] == {"requests": 3, "cost_usd": 0.1}
    assert second["usage"] == {"input_tokens": 50, "requests": 1, "cost_usd": 0.2}
    total = {"input_tokens": 50, "requests": 4, "cost_usd": 0.3}
    assert second["usage_total"] == total
    assert rows(cli)["c1"]["usage"] == total
    assert [event["usage_total"] for event in events(cli, "finish")] == [
        {"requests": 3, "cost_usd": 0.1},
        total,
    ]

    resumed = cli.run(sweep, "--resume", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert len(cli.records()) == 2  # carried, not run again
    row = rows(cli)["c1"]
    assert (row["resumed"], row["usage"]) == (True, total)


def test_a_retry_failed_rerun_adds_to_the_recorded_total(batch_cli: BatchCli) -> None:
    cli = batch_cli
    flag = cli.dir / "failed-once"
    sweep = write_sweep(cli, {"c1": case("flaky", str(flag))})
    assert cli.run(sweep, "--no-progress").returncode == 1  # the api_or_credit error

    rerun = cli.run(sweep, "--retry-failed", "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    newest = newest_records(cli)["c1"]
    assert newest["attempt"] == 2
    assert newest["usage_total"] == {"input_tokens": 50, "requests": 4, "cost_usd": 0.3}
    assert rows(cli)["c1"]["usage"] == newest["usage_total"]


def test_a_timed_out_job_still_counts_what_it_reported(batch_cli: BatchCli) -> None:
    sweep = write_sweep(batch_cli, {"c1": case("slow", timeout="2s")})
    done = batch_cli.run(sweep, "--no-progress")
    assert done.returncode == 1

    (record,) = batch_cli.records()
    assert (record["outcome"], record["stop_reason"]) == ("error", "timeout")
    assert record["usage"] == {"input_tokens": 700, "cost_usd": 0.05}
    assert record["reason"] == "timeout after 2.0s: waiting for the model"


def test_bad_usage_values_are_ignored_with_a_warning_and_never_change_the_outcome(
    batch_cli: BatchCli,
) -> None:
    sweep = write_sweep(batch_cli, {"c1": case("bad")})
    done = batch_cli.run(sweep, "--no-progress")
    assert done.returncode == 0, done.stderr

    (record,) = batch_cli.records()
    assert record["outcome"] == "passed"
    # The valid field is kept; the two bad ones are left out and named.
    assert record["usage"] == {"output_tokens": 10}
    problem = (
        "usage.input_tokens is a string, not a whole number of at least 0; "
        "usage.cost_usd is -1, not a number of at least 0"
    )
    assert record["result"]["usage_error"] == problem
    # A key this version does not know is kept as written, never summed.
    assert record["result"]["usage_other"] == {"cache_read_tokens": 5}
    log = (batch_cli.only_batch_dir() / record["run_dir"] / "output.log").read_text()
    assert f"batch: warning: {problem}; ignored\n" in log


FLAKY_JUDGE = """\
import os, sys
from run_support.results import write_result
if not os.path.exists("judged-once"):
    open("judged-once", "w").close()
    write_result(None, "error", "api_or_credit", usage={"requests": 1, "cost_usd": 0.5})
    sys.exit(2)
write_result(None, "passed", usage={"requests": 1, "cost_usd": 0.25})
"""


def test_a_reused_step_keeps_its_usage_but_adds_nothing_to_the_new_attempt(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    (cli.dir / "eval.py").write_text(EVAL)
    (cli.dir / "judge.py").write_text(FLAKY_JUDGE)
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "output": "runs",
                "cases": ["c1"],
                "models": ["m"],
                "retries": 1,
                "retry_backoff": "0s",
                "steps": [
                    {"name": "eval", "command": [sys.executable, "eval.py"]},
                    {"name": "judge", "command": [sys.executable, "judge.py"]},
                ],
            }
        )
    )
    done = cli.run(sweep, "--no-progress")
    assert done.returncode == 0, done.stderr

    first, second = sorted(cli.records(), key=lambda record: record["attempt"])
    eval_usage = {"input_tokens": 1000, "output_tokens": 200, "requests": 1, "cost_usd": 0.01}
    assert first["usage"] == {**eval_usage, "requests": 2, "cost_usd": 0.51}
    assert [step["status"] for step in second["steps"]] == ["reused", "passed"]
    assert second["steps"][0]["usage"] == eval_usage  # kept in its entry ...
    assert second["usage"] == {"requests": 1, "cost_usd": 0.25}  # ... not paid again
    assert second["usage_total"] == {**eval_usage, "requests": 3, "cost_usd": 0.76}
    assert rows(cli)["c1"]["usage"] == second["usage_total"]


# --- numbers past the bound (issue 27, item 2) ------------------------------------------------

#: argv: USAGE-JSON. Writes result.json by hand (json cannot write 4,300 nines from a float,
#: and a job need not use Python): an infra error, so ``retries`` runs it again.
RAW = """\
import os, sys
with open(os.path.join(os.environ["BATCH_RUN_DIR"], "result.json"), "w") as f:
    f.write('{"outcome": "error", "failure_category": "infra_failure", "usage": %s}' % sys.argv[1])
"""


def _strict(text: str) -> Any:
    """``text`` as standard JSON: NaN and Infinity refused."""

    def refuse(name: str) -> None:
        raise AssertionError(f"non-standard JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_numbers_past_the_bound_are_left_out_with_a_warning_and_crash_nothing(
    batch_cli: BatchCli,
) -> None:
    (batch_cli.dir / "raw.py").write_text(RAW)
    usages = {
        "nines": '{"input_tokens": %s, "requests": 1}' % ("9" * 4300),
        "huge": '{"input_tokens": 1%s, "output_tokens": 7}' % ("0" * 400),
        "dear": '{"cost_usd": 1.7e308, "requests": 1}',
        "fine": '{"input_tokens": 5, "cost_usd": 0.5}',
    }
    sweep = {
        "output": "runs",
        "cases": [{"id": name, "params": {"usage": usage}} for name, usage in usages.items()],
        "models": ["m"],
        "command": [sys.executable, "raw.py", "{params.usage}"],
        "retries": 1,
        "retry_backoff": "0s",
        "summary_interval": "0s",
        "halt": "off",  # every job errs: no broken-setup halt before each ran twice
        # Nor the breaker: its five consecutive infra failures come before the last retries
        # start or after, as the jobs happen to finish (seen refusing a retry under load).
        "breaker": "off",
    }
    path = batch_cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    done = batch_cli.run(path, "--no-progress")
    # Every job ran both its attempts and ended in its error; the sweep ran to its end.
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    batch_dir = batch_cli.only_batch_dir()
    summary = _strict((batch_dir / "batch-summary.json").read_text())
    assert summary["state"] == "complete"
    assert {row["case"]: row["attempts"] for row in summary["jobs"]} == dict.fromkeys(usages, 2)
    for record_path in batch_dir.glob("*/*/run-meta.json"):
        _strict(record_path.read_text())
    records = newest_records(batch_cli)
    # What is past the bound is left out, the rest kept and summed over the attempts.
    assert records["nines"]["usage_total"] == {"requests": 2}
    assert records["huge"]["usage_total"] == {"output_tokens": 14}
    assert records["dear"]["usage_total"] == {"requests": 2}
    assert records["fine"]["usage_total"] == {"input_tokens": 10, "cost_usd": 1.0}
    assert "not a count of at most 10^15" in records["nines"]["result"]["usage_error"]
    assert "not a cost of at most 10^9 dollars" in records["dear"]["result"]["usage_error"]
    rows = {row["case"]: row for row in summary["jobs"]}
    assert rows["dear"]["usage"] == {"requests": 2}
    for command in (["stats"], ["stats", "--format", "json"], ["report"]):
        shown = batch_cli.run(*command, batch_dir)
        assert shown.returncode == 0, shown.stderr
    _strict(batch_cli.run("stats", "--format", "json", batch_dir).stdout)


def test_stats_and_report_read_numbers_past_the_bound_in_a_summary_or_record_as_missing(
    batch_cli: BatchCli,
) -> None:
    sweep = write_sweep(batch_cli, {"c1": case("spend"), "c2": case("spend")})
    assert batch_cli.run(sweep, "--no-progress").returncode == 0
    batch_dir = batch_cli.only_batch_dir()
    # Hand-edited, or written by another tool: what no run spends, in every row and record.
    path = batch_dir / "batch-summary.json"
    summary = json.loads(path.read_text())
    for row in summary["jobs"]:
        row["duration_seconds"] = 1e308
        row["usage"] = {"input_tokens": 10**400, "cost_usd": 1e308, "requests": 3}
    path.write_text(json.dumps(summary))
    for record_path in batch_dir.glob("*/*/run-meta.json"):
        record = json.loads(record_path.read_text())
        record["duration_seconds"] = 1e308
        record["usage_total"] = {"input_tokens": 10**400, "cost_usd": 1.7e308}
        record_path.write_text(json.dumps(record))
    for command in (
        ["stats"],
        ["stats", "--source", "records"],
        ["stats", "--format", "json"],
        ["report"],
    ):
        shown = batch_cli.run(*command, batch_dir)
        assert shown.returncode == 0, (command, shown.stderr)
        assert "Traceback" not in shown.stderr
    figures = _strict(batch_cli.run("stats", "--format", "json", batch_dir).stdout)
    overall = figures["overall"]
    assert (overall["requests"], overall["input_tokens"], overall["cost_usd"]) == (6, None, None)
    assert overall["mean_duration_seconds"] is None
