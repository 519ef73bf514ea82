"""Warm workers through the real CLI (issue 32, docs/worker.md): real worker processes
(``tests/helpers/fake_worker.py``) that answer, crash mid-request, hang past the timeout,
print garbage, answer the wrong id, exit between requests or never start; the driver
interrupted once and twice, and SIGKILLed while workers serve."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
from helpers.fake_jobs import is_gone, wait_until
from helpers.fake_worker import FAKE_WORKER
from helpers.paths import REPO_ROOT

if TYPE_CHECKING:
    from conftest import BatchCli


def worker_sweep(
    cli: BatchCli, cases: Mapping[str, Mapping[str, Any]], *, worker: Any = None, **keys: Any
) -> Path:
    """A sweep whose jobs a fake worker serves, each case's params telling it what to do."""
    sweep = {
        "output": "runs",
        "cases": [{"id": case, "params": dict(params)} for case, params in cases.items()],
        "models": ["m"],
        "worker": worker or [sys.executable, str(FAKE_WORKER), str(cli.dir)],
        "kill_grace": "1s",
        **keys,
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep, indent=1), encoding="utf-8")
    return path


def starts(cli: BatchCli) -> list[int]:
    path = cli.dir / "starts"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def served(cli: BatchCli) -> list[list[str]]:
    path = cli.dir / "served"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def records_by_case(cli: BatchCli) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for meta in sorted(cli.records(), key=lambda m: (m["attempt"], m.get("repeat", 1))):
        found.setdefault(meta["test_case"], []).append(meta)
    return found


def log_of(cli: BatchCli, meta: Mapping[str, Any]) -> str:
    return (cli.only_batch_dir() / meta["run_dir"] / "output.log").read_text()


def test_one_worker_per_slot_serves_every_job_each_with_its_own_record(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cases = {f"c{n}": {} for n in range(6)} | {"f": {"do": "fail"}, "g": {"do": "garbage"}}
    sweep = worker_sweep(cli, cases, models=["m1", "m2"], max_concurrent=2)

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 0, done.stdout + done.stderr
    assert 1 <= len(starts(cli)) <= 2  # one per slot, not one per job
    assert len(served(cli)) == 16
    records = cli.records()
    assert len(records) == 16
    passed = [m for m in records if m["test_case"] not in ("f",)]
    assert {m["outcome"] for m in passed} == {"passed"}
    assert {m["stop_reason"] for m in records} == {"answer"}
    schema = json.loads((REPO_ROOT / "docs" / "schemas" / "run-meta.schema.json").read_text())
    for meta in records:
        jsonschema.validate(meta, schema)
    assert all(m["usage"] == {"input_tokens": 3} for m in passed)
    failed = [m for m in records if m["test_case"] == "f"]
    assert [m["failure_category"] for m in failed] == ["model_failure"] * 2
    assert all("wrong answer on f" in m["reason"] for m in failed)
    # What the worker wrote to stderr serving a job is in that job's log, and a line of
    # stdout that is no answer is logged there, never taken as one.
    garbage = next(m for m in records if m["test_case"] == "g")
    log = log_of(cli, garbage)
    assert "serving g" in log
    assert "not an answer: progress: 50%" in log and "not an answer: [1, 2]" in log
    assert "serving c1" not in log
    assert cli.summary()["totals"]["passed"] == 14


def test_repeats_are_requests_of_their_own_with_their_repeat(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = worker_sweep(cli, {"a": {}, "b": {}}, repeats=3, max_concurrent=1)

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 0, done.stdout + done.stderr
    assert len(starts(cli)) == 1
    seen = sorted((case, repeat, env_repeat) for case, repeat, _, env_repeat, _ in served(cli))
    assert seen == [(c, str(r), str(r)) for c in "ab" for r in (1, 2, 3)]
    assert sorted((m["test_case"], m.get("repeat", 1)) for m in cli.records()) == [
        (c, r) for c in "ab" for r in (1, 2, 3)
    ]


def test_a_worker_that_crashes_mid_request_fails_that_job_alone_which_is_retried(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cases = {"a": {}, "boom": {"do": "crash", "crash_attempt": 1}, "c": {}}
    sweep = worker_sweep(cli, cases, max_concurrent=1, retries=1, retry_backoff="0s")

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 0, done.stdout + done.stderr
    runs = records_by_case(cli)
    first, second = runs["boom"]
    assert (first["outcome"], first["failure_category"]) == ("error", "infra_failure")
    assert first["exit_code"] == 3
    assert "the worker exited with status 3 before answering" in first["reason"]
    assert "harness exploded on boom" in first["reason"]  # its last line of stderr
    assert second["outcome"] == "passed"
    assert [m["outcome"] for m in runs["a"] + runs["c"]] == ["passed", "passed"]
    assert len(starts(cli)) == 2  # a fresh worker after the crash


def test_a_request_past_its_timeout_stops_the_worker_and_a_fresh_one_serves_the_rest(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = worker_sweep(
        cli, {"a": {}, "stuck": {"do": "hang"}, "c": {}}, max_concurrent=1, timeout="1s"
    )

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 1, done.stdout + done.stderr  # the timed-out job is an error
    runs = records_by_case(cli)
    stuck = runs["stuck"][0]
    assert (stuck["outcome"], stuck["stop_reason"]) == ("error", "timeout")
    assert stuck["reason"] == "timeout after 1.0s: serving stuck"  # its last line of stderr
    assert [m["outcome"] for m in runs["a"] + runs["c"]] == ["passed", "passed"]
    first, fresh = starts(cli)
    assert is_gone(first)
    assert sorted(case for case, *_ in served(cli) if _[-1] == str(fresh)) == ["c"]


def test_an_answer_with_an_unknown_id_or_outcome_is_a_warning_and_that_jobs_error(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cases = {"a": {}, "liar": {"do": "wrong-id"}, "odd": {"do": "invalid"}, "d": {}}
    sweep = worker_sweep(cli, cases, max_concurrent=1)

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 1
    runs = records_by_case(cli)
    liar, odd = runs["liar"][0], runs["odd"][0]
    assert (liar["outcome"], liar["failure_category"]) == ("error", "infra_failure")
    assert "answered request id 'nobody', not one in flight" in liar["reason"]
    assert "batch: warning: the worker answered request id 'nobody'" in log_of(cli, liar)
    assert (odd["outcome"], odd["failure_category"]) == ("error", "infra_failure")
    assert "invalid the worker's answer: outcome 'maybe'" in odd["reason"]
    assert "batch: warning: invalid the worker's answer" in log_of(cli, odd)
    assert [m["outcome"] for m in runs["a"] + runs["d"]] == ["passed", "passed"]


def test_a_worker_that_exits_between_requests_is_replaced_and_no_job_suffers(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = worker_sweep(cli, {f"c{n}": {"do": "exit-after"} for n in range(4)}, max_concurrent=1)

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 0, done.stdout + done.stderr
    assert {m["outcome"] for m in cli.records()} == {"passed"}
    assert len(starts(cli)) == 4


def test_a_worker_that_dies_before_its_first_answer_every_time_halts_as_a_broken_setup(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = worker_sweep(cli, {f"c{n}": {} for n in range(12)}, max_concurrent=1)

    done = cli.run(
        sweep, "--no-progress", env={"FAKE_WORKER_BROKEN": "ModuleNotFoundError: no harness"}
    )

    assert done.returncode == 4, done.stdout + done.stderr
    assert (
        "Halted: first 5 jobs all ended in infra_failure (the worker exited with status 1 "
        "before answering: ModuleNotFoundError: no harness)" in done.stdout
    )
    assert len(cli.records()) == 5
    assert cli.summary()["state"] == "halted"


def test_ctrl_c_once_lets_the_request_in_flight_finish_then_workers_get_end_of_input(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    (cli.dir / "gate").touch()
    sweep = worker_sweep(cli, {"held": {"do": "hold"}, "b": {}, "c": {}}, max_concurrent=1)
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(lambda: served(cli), timeout=10)

    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    (cli.dir / "gate").unlink()

    assert driver.wait() == 130
    assert cli.statuses() == {"held": "passed", "b": "skipped", "c": "skipped"}
    (pid,) = starts(cli)
    assert (cli.dir / f"eof-{pid}").exists()  # it read end of input and exited by itself
    assert is_gone(pid)


def test_ctrl_c_twice_kills_the_workers_and_records_nothing_for_their_requests(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    (cli.dir / "gate").touch()
    cases = {"h1": {"do": "hold"}, "h2": {"do": "hold"}, "w": {}}
    sweep = worker_sweep(cli, cases, max_concurrent=2)
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(lambda: len(served(cli)) == 2, timeout=10)
    pids = starts(cli)

    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    driver.signal(signal.SIGINT)

    assert driver.wait(timeout=15) == 130
    assert all(is_gone(pid) for pid in pids)
    assert cli.records() == []
    assert set(cli.statuses().values()) == {"skipped"}
    assert not any((cli.dir / f"eof-{pid}").exists() for pid in pids)


def test_a_driver_sigkilled_while_workers_serve_leaves_no_worker_and_resumes_exactly(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    (cli.dir / "gate").touch()
    cases = {"done": {}, "h1": {"do": "hold"}, "h2": {"do": "hold"}, "later": {}}
    sweep = worker_sweep(cli, cases, max_concurrent=2)
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(lambda: {"h1", "h2"} <= {row[0] for row in served(cli)}, timeout=10)
    pids = starts(cli)

    driver.signal(signal.SIGKILL)
    driver.wait()

    assert wait_until(lambda: all(is_gone(pid) for pid in pids), timeout=10)
    assert sorted(m["test_case"] for m in cli.records()) == ["done"]
    (cli.dir / "gate").unlink()
    served_before = len(served(cli))

    resumed = cli.run(sweep, "--resume", "--no-progress")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rerun = sorted(row[0] for row in served(cli)[served_before:])
    assert rerun == ["h1", "h2", "later"]
    assert sorted(m["test_case"] for m in cli.records()) == ["done", "h1", "h2", "later"]


def test_an_async_worker_serves_concurrency_requests_at_once(batch_cli: BatchCli) -> None:
    cli = batch_cli
    worker = {"command": [sys.executable, str(FAKE_WORKER), str(cli.dir)], "concurrency": 2}
    sweep = worker_sweep(cli, {f"c{n}": {} for n in range(6)}, worker=worker, max_concurrent=2)

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 0, done.stdout + done.stderr
    assert len(starts(cli)) == 1
    assert len(cli.records()) == 6


def test_worker_with_steps_or_a_dask_executor_is_refused_in_one_line(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = worker_sweep(cli, {"a": {}}, steps=[{"name": "eval", "command": ["true"]}])
    refused = cli.run(sweep)
    assert refused.returncode == 2
    assert "worker: cannot serve a multi-step job (steps:) yet" in refused.stderr
    assert cli.batch_dirs() == []

    sweep = worker_sweep(cli, {"a": {}})
    refused = cli.run(sweep, "--executor", "dask")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "worker: runs on the local executor only; --executor dask" in refused.stderr
    assert cli.batch_dirs() == []


def test_a_worker_that_cannot_start_is_each_jobs_error_naming_the_program(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = worker_sweep(cli, {"a": {}, "b": {}}, worker=["./no-such-harness"], max_concurrent=1)

    done = cli.run(sweep, "--no-progress")

    assert done.returncode == 1
    for meta in cli.records():
        assert (meta["outcome"], meta["failure_category"]) == ("error", "infra_failure")
        assert meta["reason"].startswith("cannot start './no-such-harness'")
        assert "cannot start './no-such-harness'" in log_of(cli, meta)


def test_a_flood_of_empty_stdout_lines_costs_time_in_proportion_to_its_size(
    batch_cli: BatchCli,
) -> None:
    # 48 MiB of empty lines: about 2 s of the driver's time read in one split per read,
    # minutes when the rest of each read was split again after every line (issue 40,
    # item 13); the timeout turns that back into a failure, not a hang.
    cli = batch_cli
    sweep = worker_sweep(cli, {"flood": {"do": "blank-lines", "mib": 48}, "after": {}})

    done = cli.run(sweep, "--no-progress", timeout=40)

    assert done.returncode == 0, done.stdout + done.stderr
    assert {m["test_case"]: m["outcome"] for m in cli.records()} == {
        "flood": "passed",
        "after": "passed",
    }
