"""One attempt becomes a run dir with output.log and, written last, its run-meta.json."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_jobs import (
    Batch,
    fake_agent_command,
    fake_agent_env,
    is_gone,
    make_sweep,
    read_pid,
    wait_until,
)

from batch.attempt.runner import AttemptResult, run_attempt
from batch.errors import RecordWriteError
from batch.plan.jobs import Job
from batch.sweep.load import ModelSpec

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def batch(tmp_path: Path) -> Batch:
    return Batch(tmp_path)


def test_a_passing_job_gets_a_complete_record(batch: Batch) -> None:
    result = batch.run(batch.sweep("print=hello", "exit=0"), Job("c01", "openai/gpt-4o"), 2)
    record = batch.record(result)

    assert re.fullmatch(r"openai--gpt-4o/c01-openai--gpt-4o-\d{8}T\d{12}Z-a2", result.run_dir)
    assert batch.log(result) == "hello\n"
    assert record["run_dir"] == result.run_dir
    assert {k: record[k] for k in ("schema", "test_case", "model", "attempt", "batch_id")} == {
        "schema": 1,
        "test_case": "c01",
        "model": "openai/gpt-4o",
        "attempt": 2,
        "batch_id": "batch-20261130T031500Z",
    }
    assert (record["outcome"], record["failure_category"]) == ("passed", None)
    assert (record["stop_reason"], record["exit_code"], record["result"]) == ("exit", 0, {})
    assert STAMP.match(record["timestamp"]) and STAMP.match(record["finished_at"])
    assert 0 < record["duration_seconds"] < 10
    assert result.meta is not None and result.meta.outcome == "passed"


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (("exit=1",), ("failed", "model_failure", "exit", 1)),
        (("exit=2",), ("error", "infra_failure", "exit", 2)),
        (("kill=KILL",), ("error", "infra_failure", "signal", -9)),
        (("print=HTTP 429: rate limit", "exit=1"), ("error", "api_or_credit", "exit", 1)),
    ],
)
def test_exit_status_and_log_decide_the_outcome(
    batch: Batch, actions: tuple[str, ...], expected: tuple[Any, ...]
) -> None:
    record = batch.record(batch.run(batch.sweep(*actions)))
    got = (
        record["outcome"],
        record["failure_category"],
        record["stop_reason"],
        record["exit_code"],
    )
    assert got == expected


def test_a_valid_result_file_decides_and_fills_result(batch: Batch) -> None:
    report = json.dumps({"outcome": "failed", "failure_category": "wrong_format", "score": 0.5})
    record = batch.record(batch.run(batch.sweep("exit=0", env=fake_agent_env(f"result={report}"))))
    assert (record["outcome"], record["failure_category"]) == ("failed", "wrong_format")
    assert record["result"] == {"score": 0.5}


def test_a_job_reporting_failed_for_a_non_model_reason_is_recorded_as_error(batch: Batch) -> None:
    report = json.dumps({"outcome": "failed", "failure_category": "task_data", "score": 0.5})
    record = batch.record(batch.run(batch.sweep("exit=0", env=fake_agent_env(f"result={report}"))))
    assert (record["outcome"], record["failure_category"]) == ("error", "task_data")
    assert record["result"] == {"score": 0.5, "reported_outcome": "failed"}


def test_an_invalid_result_file_is_an_infra_error_with_the_reason(batch: Batch) -> None:
    record = batch.record(batch.run(batch.sweep("exit=0", env=fake_agent_env("result={oops"))))
    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")
    assert "not JSON" in record["result"]["classification_error"]


def test_a_timeout_escalates_to_kill_for_the_whole_group(batch: Batch, tmp_path: Path) -> None:
    sweep = batch.sweep("ignore-term", f"grandchild={tmp_path}/gc", "sleep=30", kill_grace=0.3)
    result = batch.run(sweep, Job("c01", "mock/oracle", timeout=0.5))
    record = batch.record(result)

    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")
    assert (record["stop_reason"], record["exit_code"]) == ("timeout", -signal.SIGKILL)
    assert 0.8 <= record["duration_seconds"] < 3
    assert wait_until(lambda: is_gone(read_pid(tmp_path / "gc")), 2)


def test_a_timeout_records_what_the_process_returned(batch: Batch, tmp_path: Path) -> None:
    # docs/ledger.md: exit_code after a timeout is the real status, stop_reason says why.
    stopped = batch.record(batch.run(batch.sweep("sleep=30"), Job("c01", "m", timeout=0.3)))
    trap = tmp_path / "trap.sh"
    trap.write_text("trap 'exit 143' TERM\nsleep 30 &\nwait\n")
    caught = batch.record(
        batch.run(make_sweep(batch.root, ["sh", str(trap)]), Job("c02", "m", timeout=0.3))
    )
    assert (stopped["stop_reason"], stopped["exit_code"]) == ("timeout", -signal.SIGTERM)
    assert (caught["stop_reason"], caught["exit_code"]) == ("timeout", 143)
    assert (caught["outcome"], caught["failure_category"]) == ("error", "infra_failure")


def test_what_a_job_leaves_running_is_stopped_when_it_ends(batch: Batch, tmp_path: Path) -> None:
    result = batch.run(batch.sweep(f"grandchild={tmp_path}/gc", "exit=0", kill_grace=0.2))
    assert batch.record(result)["outcome"] == "passed"
    assert is_gone(read_pid(tmp_path / "gc"))


def test_a_missing_executable_is_recorded_as_an_infra_error(batch: Batch) -> None:
    sweep = make_sweep(batch.root, ["./no-such-agent", "{case}"])
    result = batch.run(sweep)
    record = batch.record(result)
    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")
    assert "no-such-agent" in batch.log(result)
    assert "No such file" in record["result"]["start_error"]


def test_an_unknown_placeholder_is_recorded_as_an_infra_error(batch: Batch) -> None:
    result = batch.run(make_sweep(batch.root, ["echo", "{nope}"]))
    assert batch.record(result)["outcome"] == "error"
    assert "no value for placeholder 'nope'" in batch.log(result)


def test_placeholders_are_filled_in(batch: Batch) -> None:
    command = [
        *fake_agent_command("record"),
        "{case}|{model}|{model_safe}|{attempt}|{params.level}|{{x}}",
        "{run_dir}",
        "{batch_dir}",
        "--label={container_label}",
    ]
    job = Job("c01", "qwen3:8b", params={"level": "hard"})
    result = batch.run(make_sweep(batch.root, command, models=["qwen3:8b"]), job, 3)
    seen = json.loads((batch.dir / result.run_dir / "agent-seen.json").read_text())

    assert seen["argv"][1:] == [
        "c01|qwen3:8b|qwen3--8b|3|hard|{x}",
        str(batch.dir / result.run_dir),
        str(batch.dir),
        f"--label=batch-ledger.run={batch.dir.name}/{result.run_dir}",
    ]
    assert seen["cwd"] == str(batch.root)


def test_the_job_environment_has_sweep_model_and_batch_variables(batch: Batch) -> None:
    model = ModelSpec(id="m/one", env={"BATCH_MODEL_URL": "http://127.0.0.1:1234/v1"})
    sweep = batch.sweep("record", models=[model], env={"FAKE_SWEEP": "1"})
    result = batch.run(sweep, Job("c01", "m/one"), 2)
    env = json.loads((batch.dir / result.run_dir / "agent-seen.json").read_text())["env"]

    # The job token marks the process as this invocation's first job (batch.processes).
    assert re.fullmatch(r"[0-9a-f]{16}\.1", env.pop("BATCH_JOB_TOKEN"))
    assert env == {
        "FAKE_SWEEP": "1",
        "BATCH_MODEL_URL": "http://127.0.0.1:1234/v1",
        "BATCH_CASE": "c01",
        "BATCH_MODEL": "m/one",
        "BATCH_RUN_DIR": str(batch.dir / result.run_dir),
        "BATCH_ATTEMPT": "2",
        "BATCH_REPEAT": "1",
        "BATCH_DIR": str(batch.dir),
        # Every job, with or without the sweep's containers key: one key=value label.
        "BATCH_CONTAINER_LABEL": f"batch-ledger.run={batch.dir.name}/{result.run_dir}",
    }


HOSTILE = [
    "a/b",
    "x:y",
    "with space",
    "quo'te\"s",
    "$(touch pwned)",
    "; touch pwned2 #",
    "..",
    "../../escape",
    "{model}",
    "é-ünï-日本",
    "n" * 200,
]


def test_hostile_names_reach_the_job_verbatim_and_stay_inside_the_batch_dir(
    batch: Batch, tmp_path: Path
) -> None:
    command = [*fake_agent_command("record", "touch={run_dir}/made"), "{case}", "{model}"]
    before = set(tmp_path.rglob("*"))
    dirs = []
    for name in HOSTILE:
        sweep = make_sweep(batch.root, command, models=[f"evil/{name}"])
        result = batch.run(sweep, Job(name, f"evil/{name}"))
        run_dir = batch.dir / result.run_dir
        assert run_dir.resolve().parent.parent == batch.dir.resolve()
        seen = json.loads((run_dir / "agent-seen.json").read_text())
        assert seen["argv"][-2:] == [name, f"evil/{name}"]
        assert (seen["env"]["BATCH_CASE"], seen["env"]["BATCH_MODEL"]) == (name, f"evil/{name}")
        assert (batch.record(result)["test_case"], batch.record(result)["model"]) == (
            name,
            f"evil/{name}",
        )
        dirs.append(run_dir)

    new = set(tmp_path.rglob("*")) - before
    assert all(path.resolve().is_relative_to(batch.dir.resolve()) for path in new)
    assert all((d / "made").exists() for d in dirs)
    assert len(set(dirs)) == len(HOSTILE)
    assert not any(path.name.startswith("pwned") for path in tmp_path.rglob("*"))


def test_two_attempts_in_the_same_microsecond_get_distinct_run_dirs(batch: Batch) -> None:
    sweep = batch.sweep("exit=0")
    first = batch.run(sweep, clock=lambda: 1_796_008_500.0)
    second = batch.run(sweep, clock=lambda: 1_796_008_500.0)
    assert second.run_dir == f"{first.run_dir}-2"
    assert batch.record(second)["run_dir"] == second.run_dir


def test_a_job_killed_by_the_users_abort_gets_no_record(batch: Batch, tmp_path: Path) -> None:
    async def scenario() -> AttemptResult:
        sweep = batch.sweep(f"pidfile={tmp_path}/pid", "sleep=30")
        task = asyncio.create_task(run_attempt(Job("c01", "m"), sweep, batch.ctx, 1))
        await asyncio.to_thread(read_pid, tmp_path / "pid")
        await batch.registry.kill_all(0.3)
        return await task

    result = asyncio.run(scenario())
    assert result.meta is None
    assert (batch.dir / result.run_dir / "output.log").exists()
    assert not (batch.dir / result.run_dir / "run-meta.json").exists()


def test_a_cancelled_attempt_stops_its_job_and_writes_no_record(
    batch: Batch, tmp_path: Path
) -> None:
    async def scenario() -> None:
        sweep = batch.sweep("ignore-term", f"pidfile={tmp_path}/pid", "sleep=30", kill_grace=0.2)
        task = asyncio.create_task(run_attempt(Job("c01", "m"), sweep, batch.ctx, 1))
        await asyncio.to_thread(read_pid, tmp_path / "pid")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert is_gone(read_pid(tmp_path / "pid"))
    assert list(batch.dir.rglob("run-meta.json")) == []
    assert len(batch.registry) == 0


def test_a_record_the_batch_dir_refuses_raises_record_write_error(
    batch: Batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(run_dir: Path, meta: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("batch.attempt.runner.write_run_meta", full)
    with pytest.raises(RecordWriteError) as caught:
        batch.run(batch.sweep("pass"))
    assert caught.value.path.name == "run-meta.json"
    assert caught.value.error.errno == errno.ENOSPC


def test_a_job_that_takes_its_records_name_is_an_error_recorded_beside_it(batch: Batch) -> None:
    # The job takes the record's name with a directory, so the atomic replace fails: the
    # job's doing, not the batch dir's, so it is the job's error and the sweep goes on.
    sweep = make_sweep(batch.root, ["mkdir", "{run_dir}/run-meta.json"])
    result = batch.run(sweep)
    assert result.meta is not None and result.run_dir.endswith("-a1-2")
    record = batch.record(result)
    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")
    assert (record["attempt"], record["exit_code"], record["run_dir"]) == (1, 0, result.run_dir)
    detail = record["result"]["record_error"]
    assert detail.startswith("something that is not a file was put at the job's run-meta.json")
    assert "the job itself ended with: exit code 0" in detail
    # The reason is what was found, on one line; the detail holds the rest.
    assert record["reason"] == "something that is not a file was put at the job's run-meta.json"


def test_output_log_is_read_only_from_its_last_mebibyte(batch: Batch, tmp_path: Path) -> None:
    script = tmp_path / "noisy.py"
    script.write_text("print('429 rate limit'); print('x' * (2 << 20)); raise SystemExit(1)\n")
    sweep = make_sweep(batch.root, [sys.executable, str(script)])
    assert batch.record(batch.run(sweep))["failure_category"] == "model_failure"
