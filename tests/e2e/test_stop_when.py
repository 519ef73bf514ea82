"""stop_when through the CLI: jobs whose pass or fail per case (and repeat) is known from a
hash, so every figure the driver prints can be checked against a direct count.

A half_width stop well before the case count whose interval holds the rate over all the
cases; a compare of two models 30 pp apart that stops early with the right sign; a driver
SIGKILLed mid-run and resumed that reaches the very stop an unbroken run reaches, with no
job recorded twice; a halted sweep resumed to the same stop; repeats as one unit a case;
bad values refused with one located line.
"""

from __future__ import annotations

import hashlib
import json
import signal
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers.fake_jobs import wait_until
from helpers.paths import REPO_ROOT
from jsonschema import Draft202012Validator

from batch.plan.case_order import shuffled
from batch.stop_when.rules import STOPPED, Stop, first_stop, half_width_reached

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import BatchCli

#: The job: passes when the hash of its case (and repeat) falls below its model's rate, the
#: model ``m90`` passing at 0.90; logs ``case model repeat`` first; sleeps ``SLEEP`` if set.
#: With ``ERROR_FIRST`` set, a case whose hash is above 0.95 ends in error (exit 3, an
#: infra_failure) on its first attempt; a later attempt sleeps ``RETRY_SLEEP`` first.
#: A shell script, not Python: these sweeps start hundreds of jobs, and a Python start-up
#: costs ten to twenty times a shell's. The hash is read per case and repeat from the case's
#: params (:func:`case_params`): the lowest rate in percent that passes it, and whether it
#: errs first.
JOB = r"""
case=$1 model=$2 repeat=$3 attempt=$4 here=$5
printf '%s\t%s\t%s\n' "$case" "$model" "$repeat" >> "$here/runs.log"
[ "${SLEEP:-0}" = 0 ] || sleep "$SLEEP"
[ "$attempt" = 1 ] || [ "${RETRY_SLEEP:-0}" = 0 ] || sleep "$RETRY_SLEEP"
shift 5
case $repeat in
    1) lowest=$1 errs=$4 ;;
    2) lowest=$2 errs=$5 ;;
    3) lowest=$3 errs=$6 ;;
    *) exit 9 ;;
esac
if [ -n "${ERROR_FIRST:-}" ] && [ "$errs" = 1 ] && [ "$attempt" = 1 ]; then
    exit 3
fi
[ "${model#m}" -ge "$lowest" ]
"""
REPEATS = (1, 2, 3)


def case_hash(case: str, repeat: int = 1) -> float:
    digest = hashlib.sha256(f"{case}/{repeat}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def passes(case: str, model: str, repeat: int = 1) -> bool:
    return case_hash(case, repeat) < int(model[1:]) / 100


def case_params(case: str) -> dict[str, str]:
    """What the job reads of its case: per repeat, the lowest rate in percent at which
    :func:`passes` (``l1``...), and whether it errs first (``e1``...)."""
    params = {}
    for repeat in REPEATS:
        h = case_hash(case, repeat)
        params[f"l{repeat}"] = str(next(r for r in range(101) if h < r / 100))
        params[f"e{repeat}"] = "1" if h > 0.95 else "0"
    return params


def write_sweep(cli: BatchCli, cases: int, models: list[str], **keys: Any) -> Path:
    (cli.dir / "job.sh").write_text(JOB, encoding="utf-8")
    ids = [f"c{i:04d}" for i in range(cases)]
    slots = [f"{{params.{kind}{repeat}}}" for kind in "le" for repeat in REPEATS]
    sweep = {
        "name": "stop",
        "output": "runs",
        "cases": [{"id": case, "params": case_params(case)} for case in ids],
        "models": models,
        "command": [
            "/bin/sh", str(cli.dir / "job.sh"),
            "{case}", "{model}", "{repeat}", "{attempt}", str(cli.dir), *slots,
        ],
        "max_concurrent": 4,
        **keys,
    }  # fmt: skip
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    return path


def rows_of(summary: dict[str, Any], model: str) -> list[dict[str, Any]]:
    return [row for row in summary["jobs"] if row["model"] == model]


def direct_stop(
    summary: dict[str, Any], cases: list[str], value: Callable[[str], float], half_width: float
) -> Stop:
    """The stop a direct computation gives: each case's ``value`` in the batch's random
    order, the first prefix whose interval is at most ± ``half_width``."""
    order = shuffled(cases, summary["stop_when"]["seed"], str)
    stop, _ = first_stop(
        [value(case) for case in order],
        lambda b: half_width_reached(b, half_width),
        0.95,
        cases=len(cases),
        target=half_width,
    )
    assert stop is not None
    return stop


def test_a_half_width_stop_comes_well_before_the_case_count_and_covers_the_rate(
    batch_cli: BatchCli,
) -> None:
    sweep = write_sweep(batch_cli, 600, ["m90"], stop_when={"half_width": "8pp"})
    result = batch_cli.run(sweep)
    assert result.returncode == 0, result.stderr
    summary = batch_cli.summary()
    standing = summary["stop_when"]["models"]["m90"]
    assert standing["stopped"] and standing["reason"] == "half_width"
    assert standing["cases_used"] < 300  # well before the 600 cases
    assert (standing["high"] - standing["low"]) / 2 <= 0.08
    truth = sum(passes(f"c{i:04d}", "m90") for i in range(600)) / 600
    assert standing["low"] <= truth <= standing["high"]
    # The cases it ran are the first of the batch's random order, not of the file's.
    seed = summary["stop_when"]["seed"]
    ran = {row["case"] for row in summary["jobs"] if row["status"] != "skipped"}
    order = shuffled([f"c{i:04d}" for i in range(600)], seed, str)
    assert set(order[: standing["cases_used"]]) <= ran
    assert ran != {f"c{i:04d}" for i in range(len(ran))}
    # Jobs start in that order, and none after the stop: what ran is a prefix of the order
    # (past the cases the stop used: the jobs that ran on, or had finished out of turn while
    # an earlier case still ran).
    assert ran == set(order[: len(ran)])
    events = [
        json.loads(line)
        for line in (batch_cli.only_batch_dir() / "batch-logs" / "events.jsonl")
        .read_text()
        .splitlines()
    ]
    [stop_at] = [i for i, event in enumerate(events) if event["event"] == "stop_when"]
    # A start event comes once a job's run dir is made: after the stop, only the jobs
    # already in flight (at most max_concurrent) may still say so; none is started anew.
    assert len([e for e in events[stop_at:] if e["event"] == "start"]) <= 4
    skipped = [row for row in summary["jobs"] if row["status"] == "skipped"]
    assert len(skipped) == 600 - len(ran)
    assert all(row["skip_reason"].startswith(STOPPED) for row in skipped)
    assert "m90: stopped by stop_when: pass rate" in result.stdout
    schema = json.loads((REPO_ROOT / "docs/schemas/batch-summary.schema.json").read_text())
    Draft202012Validator(schema).validate(summary)  # the summary's stop_when as documented
    assert "left without a result" not in result.stdout
    # batch stats reads the model on the interval it stopped on.
    stats = json.loads(
        batch_cli.run("stats", batch_cli.only_batch_dir(), "--format", "json").stdout
    )
    (model,) = stats["models"]
    assert model["adjusted_pass_rate_low"] == standing["low"]
    assert model["adjusted_pass_rate_high"] == standing["high"]
    assert model["adjusted_pass_rate_method"] == "eb-confidence-sequence"
    assert model["stop_when"]["stopped"] is True
    assert model["stop_when"]["cases_used"] == standing["cases_used"]
    table = batch_cli.run("stats", batch_cli.only_batch_dir()).stdout
    assert "m90: stopped early by stop_when (half_width)" in table


def test_a_compare_of_models_30_pp_apart_stops_early_with_the_right_sign(
    batch_cli: BatchCli,
) -> None:
    sweep = write_sweep(
        batch_cli,
        400,
        ["m50", "m80", "m60"],
        stop_when={"compare": ["m50", "m80"], "margin": "1pp"},
    )
    result = batch_cli.run(sweep)
    assert result.returncode == 0, result.stderr
    summary = batch_cli.summary()
    pair = summary["stop_when"]["models"]
    assert pair["m50"] == pair["m80"]
    assert pair["m80"]["stopped"] and pair["m80"]["reason"] == "b_better"
    assert pair["m80"]["low"] > 0
    assert pair["m80"]["cases_used"] < 200
    assert "m60" not in pair  # not compared: it runs every case
    assert all(row["status"] != "skipped" for row in rows_of(summary, "m60"))
    for model in ("m50", "m80"):
        left = [row for row in rows_of(summary, model) if row["status"] == "skipped"]
        assert len(left) > 200
        assert all("m80 is better" in row["skip_reason"] for row in left)
    schema = json.loads((REPO_ROOT / "docs/schemas/batch-summary.schema.json").read_text())
    Draft202012Validator(schema).validate(summary)
    truth = sum(passes(c, "m80") - passes(c, "m50") for c in (f"c{i:04d}" for i in range(400)))
    assert pair["m80"]["low"] <= truth / 400 <= pair["m80"]["high"]


def test_a_driver_killed_mid_run_resumes_to_the_same_stop_with_no_job_recorded_twice(
    batch_cli: BatchCli,
) -> None:
    rule = {"half_width": "8pp", "seed": 4545}
    sweep = write_sweep(batch_cli, 500, ["m90"], stop_when=rule)
    driver = batch_cli.start(sweep, env={"SLEEP": "0.05"})
    log = batch_cli.dir / "runs.log"
    assert wait_until(lambda: log.exists() and len(log.read_text().splitlines()) >= 40)
    driver.signal(signal.SIGKILL)
    driver.wait()
    (batch_dir,) = batch_cli.batch_dirs()
    recorded_before = len(batch_cli.records(batch_dir))
    assert recorded_before > 0
    resumed = batch_cli.run(sweep, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    killed = batch_cli.summary(batch_dir)["stop_when"]
    records = batch_cli.records(batch_dir)
    assert max(Counter((r["test_case"], r["model"]) for r in records).values()) == 1
    # The same sweep run unbroken elsewhere stops on the same case with the same interval.
    other = write_sweep(batch_cli, 500, ["m90"], stop_when=rule, output="runs-clean")
    clean = batch_cli.run(other)
    assert clean.returncode == 0, clean.stderr
    (clean_dir,) = [p for p in (batch_cli.dir / "runs-clean").iterdir() if p.is_dir()]
    unbroken = json.loads((clean_dir / "batch-summary.json").read_text())["stop_when"]
    assert killed["models"]["m90"]["stopped"]
    assert recorded_before < killed["models"]["m90"]["cases_used"]  # killed before its stop
    assert killed["models"] == unbroken["models"]
    # A resume of the stopped batch runs nothing more.
    log.unlink()
    again = batch_cli.run(sweep, "--resume")
    assert again.returncode == 0, again.stderr
    assert not log.exists()


@pytest.mark.parametrize("given", ["sweep", "--repeats"])
def test_with_repeats_a_case_is_one_unit_and_the_stop_is_the_direct_computation(
    batch_cli: BatchCli, given: str
) -> None:
    cases = [f"c{i:04d}" for i in range(300)]
    keys: dict[str, Any] = {"repeats": 3} if given == "sweep" else {}
    sweep = write_sweep(batch_cli, 300, ["m70"], stop_when={"half_width": "10pp"}, **keys)
    result = batch_cli.run(sweep, *(("--repeats", "3") if given == "--repeats" else ()))
    assert result.returncode == 0, result.stderr
    summary = batch_cli.summary()
    standing = summary["stop_when"]["models"]["m70"]
    assert standing["stopped"]
    # Directly: each case's share of its 3 repeats, in the batch's order, the first prefix
    # whose interval is at most ±10 pp.
    stop = direct_stop(
        summary, cases, lambda case: sum(passes(case, "m70", r) for r in (1, 2, 3)) / 3, 0.10
    )
    assert standing["cases_used"] == stop.bounds.n
    assert standing["low"] == pytest.approx(stop.bounds.low, abs=1e-6)
    assert standing["high"] == pytest.approx(stop.bounds.high, abs=1e-6)
    # The cases it read ran all their repeats; a case is skipped whole or not at all
    # (but for the few that were starting when it stopped).
    ran = Counter(row["case"] for row in summary["jobs"] if row["status"] != "skipped")
    order = shuffled(cases, summary["stop_when"]["seed"], str)
    assert all(ran[case] == 3 for case in order[: stop.bounds.n])
    assert sum(count not in (0, 3) for count in ran.values()) <= 1


def test_retry_failed_reruns_the_errors_and_the_stop_is_read_again_from_the_ledger(
    batch_cli: BatchCli,
) -> None:
    cases = [f"c{i:04d}" for i in range(500)]
    # Seed 4: the errors are failing cases, so leaving them out stopped the first run after
    # 73 cases; with their outcomes the stop comes after 151 (the stop moves).
    rule = {"half_width": "8pp", "seed": 4}
    # More slots than retries: the model's other jobs ask to start while every retry runs.
    sweep = write_sweep(batch_cli, 500, ["m90"], stop_when=rule, max_concurrent=10)
    first = batch_cli.run(sweep, env={"ERROR_FIRST": "1"})
    assert first.returncode == 1, first.stderr  # some jobs ended in error
    before = batch_cli.summary()["stop_when"]["models"]["m90"]
    assert before["stopped"]
    errors = [r for r in batch_cli.summary()["jobs"] if r["status"] == "error"]
    assert errors
    # The retries take a while: the stopped model's other jobs wait for their outcomes
    # rather than being skipped on the stop the retries move. Cases run now for the first
    # time do not err.
    retried = batch_cli.run(sweep, "--retry-failed", env={"RETRY_SLEEP": "1"})
    assert retried.returncode == 0, retried.stderr
    summary = batch_cli.summary()
    assert not [r for r in summary["jobs"] if r["status"] == "error"]
    after = summary["stop_when"]["models"]["m90"]
    # Directly from what the ledger now says: every case's outcome, in the batch's order.
    stop = direct_stop(summary, cases, lambda case: float(passes(case, "m90")), 0.08)
    assert after["stopped"]
    assert after["cases_used"] == stop.bounds.n > before["cases_used"]
    assert after["low"] == pytest.approx(stop.bounds.low, abs=1e-6)
    # Only the errors ran twice; every other job has one record.
    counts = Counter((r["test_case"], r["model"]) for r in batch_cli.records())
    assert {key for key, n in counts.items() if n > 1} == {(r["case"], "m90") for r in errors}


def test_a_model_may_set_its_own_target_or_run_every_case(batch_cli: BatchCli) -> None:
    models = ["m90", {"id": "m80", "stop_when": {"half_width": "12pp"}}]
    models.append({"id": "m70", "stop_when": "off"})
    sweep = write_sweep(batch_cli, 400, models, stop_when={"half_width": "8pp", "seed": 45})
    plan = batch_cli.run("plan", sweep)
    assert "m80 (its own: ±12.0 pp): likely stops within about" in plan.stdout
    result = batch_cli.run(sweep)
    assert result.returncode == 0, result.stderr
    summary = batch_cli.summary()
    standing = summary["stop_when"]["models"]
    assert set(standing) == {"m90", "m80"}  # m70 is not stopped: it runs every case
    assert standing["m80"]["half_width"] == 0.12 and standing["m90"]["half_width"] == 0.08
    assert standing["m80"]["stopped"] and standing["m80"]["high"] - standing["m80"]["low"] <= 0.24
    assert all(row["status"] != "skipped" for row in rows_of(summary, "m70"))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"half_widht": "3pp"},
            "unknown key 'half_widht' in stop_when (did you mean 'half_width'?)",
        ),
        ({"half_width": "-3pp"}, "stop_when.half_width: must be more than 0, got -3pp"),
        ({"half_width": ".nan"}, "stop_when.half_width: must be a finite number"),
        ({"half_width": "3pp", "confidence": 1.5}, "stop_when.confidence: must be at least 0.5"),
        ({"compare": ["m90", "m99"]}, "stop_when.compare[1]: 'm99' is not a model of this sweep"),
        ({"compare": ["m90", "m80"], "margin": -0.01}, "stop_when.margin: must be 0 or more"),
        (
            {"half_width": "3pp", "sead": 4},
            "unknown key 'sead' in stop_when (did you mean 'seed'?)",
        ),
    ],
)
def test_a_bad_stop_when_is_one_located_line_and_exit_2(
    batch_cli: BatchCli, value: dict[str, Any], message: str
) -> None:
    path = batch_cli.dir / "sweep.yaml"
    text = "cases: [a, b]\nmodels: [m90, m80]\ncommand: [x]\nstop_when: " + json.dumps(value)
    # YAML's own non-finite number, not JSON's string of it.
    path.write_text(text.replace('".nan"', ".nan") + "\n", encoding="utf-8")
    result = batch_cli.run(path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path.name}:4:") or f"{path}:4:" in lines[0], lines[0]
    assert message in lines[0]
    assert not (batch_cli.dir / "runs").exists()


def test_a_halted_sweep_resumed_reaches_the_stop_a_direct_computation_gives(
    batch_cli: BatchCli,
) -> None:
    """A halt (here: 30 failures, most of them the weak model's) stops the sweep before
    m90 reaches its stop; the resume carries every record, runs no job twice, and m90 stops
    where its outcomes in the batch's order say it must."""
    cases = [f"c{i:04d}" for i in range(400)]
    rule = {"half_width": "8pp", "seed": 7}
    sweep = write_sweep(batch_cli, 400, ["m90", "m20"], stop_when=rule)
    halted = batch_cli.run(sweep, "--halt", "soon,fail=30")
    assert halted.returncode == 4, halted.stdout + halted.stderr
    summary = batch_cli.summary()
    assert summary["state"] == "halted"
    assert not summary["stop_when"]["models"]["m90"]["stopped"]
    resumed = batch_cli.run(sweep, "--resume", "--halt", "off")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = batch_cli.summary()
    standing = summary["stop_when"]["models"]["m90"]
    stop = direct_stop(summary, cases, lambda case: float(passes(case, "m90")), 0.08)
    assert standing["stopped"]
    assert standing["cases_used"] == stop.bounds.n
    assert standing["low"] == pytest.approx(stop.bounds.low, abs=1e-6)
    counts = Counter((r["test_case"], r["model"]) for r in batch_cli.records())
    assert max(counts.values()) == 1
