"""The view's fold of a summary and events into what the page shows, as plain data."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from batch.steering import Control, ControlError, parse_control, take_requests, write_request
from batch.view.follow import BatchFollower
from batch.view.job_files import LOG_TAIL, job_files
from batch.view.state import GRID_CELLS, BatchView


def summary(*rows: dict[str, Any], state: str = "running") -> dict[str, Any]:
    return {"schema": 1, "state": state, "jobs": list(rows)}


def row(case: str, model: str, status: str = "pending", **keys: Any) -> dict[str, Any]:
    return {"case": case, "model": model, "status": status, "duration_seconds": None,
            "attempts": 0, "run_dir": None, **keys}  # fmt: skip


def test_counts_follow_the_events_from_the_summary() -> None:
    view = BatchView("b")
    view.load_summary(summary(row("c1", "a", "passed", duration_seconds=2.0), row("c2", "a")))
    view.apply({"event": "batch_start", "t": "2026-12-01T00:00:00Z"}, 1e9)
    view.apply({"event": "start", "case": "c2", "model": "a", "attempt": 1,
                "t": "2026-12-01T00:00:00Z"}, 0)  # fmt: skip
    started = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    running = view.overview(started + 10)
    assert running["totals"]["running"] == 1 and running["running"][0]["elapsed"] == 10.0
    assert running["running"][0]["stuck"]  # 10 s against a typical 2 s
    view.apply({"event": "finish", "case": "c2", "model": "a", "status": "failed",
                "failure_category": "model_failure", "duration_seconds": 3,
                "reason": "exit code 1", "run_dir": "a/c2"}, 0)  # fmt: skip
    done = view.overview(started + 20)
    assert done["totals"] == {"passed": 1, "failed": 1, "error": 0, "skipped": 0,
                              "pending": 0, "running": 0}  # fmt: skip
    assert done["models"][0]["adjusted_pass_rate"] == 0.5
    assert done["failures"] == [{"case": "c2", "model": "a", "repeat": 1, "status": "failed",
                                 "category": "model_failure", "reason": "exit code 1"}]  # fmt: skip
    assert {c["case"] for c in view.changed_cells()} == {"c1", "c2"}
    assert view.changed_cells() == []  # each change is sent once


def test_controls_breakers_and_limits_show_as_the_driver_took_them() -> None:
    view = BatchView("b")
    view.load_summary(summary(row("c1", "a"), row("c1", "b")))
    view.apply({"event": "control", "action": "pause", "outcome": "taken", "message": "m"}, 0)
    view.apply({"event": "control", "action": "skip", "model": "b", "outcome": "taken"}, 0)
    view.apply({"event": "control", "action": "skip", "model": "zz", "outcome": "refused"}, 0)
    view.apply({"event": "breaker", "model": "a", "state": "open", "reason": "x"}, 0)
    view.apply({"event": "concurrency", "model": "a", "current": 2, "max": 8}, 0)
    got = view.overview(0)
    assert got["paused"] and [m["skipped_by_hand"] for m in got["models"]] == [False, True]
    assert got["models"][0]["breaker"] == "open" and got["models"][0]["limit"] == {
        "current": 2,
        "max": 8,
    }
    assert [c["outcome"] for c in got["controls"]] == ["refused", "taken", "taken"]
    view.apply({"event": "control", "action": "continue", "outcome": "taken"}, 0)
    assert not view.overview(0)["paused"]


def test_hostile_events_change_nothing_they_cannot_name() -> None:
    view = BatchView("b")
    view.load_summary(summary(row("c1", "a"), {"case": 5}, "junk"))  # type: ignore[arg-type]
    for event in ({"event": "finish"}, {"event": "finish", "case": 1, "model": "a"},
                  {"event": "start", "case": "c1", "model": ["a"]}, {"event": "???"}):  # fmt: skip
        view.apply(event, 0)
    assert view.overview(0)["totals"]["pending"] == 1 and view.overview(0)["jobs"] == 1


def test_a_big_grid_shows_only_what_did_not_pass() -> None:
    view = BatchView("b")
    rows = [row(f"c{i}", "a", "passed") for i in range(GRID_CELLS)] + [row("bad", "a", "error")]
    view.load_summary(summary(*rows))
    grid = view.cells()
    assert grid["folded"] and [c["case"] for c in grid["cells"]] == ["bad"]


def test_repeats_figures_per_model() -> None:
    view = BatchView("b")
    rows = [row("c1", "a", "passed"), row("c1", "a", "failed", repeat=2),
            row("c2", "a", "passed"), row("c2", "a", "passed", repeat=2)]  # fmt: skip
    view.load_summary(summary(*rows))
    figures = view.repeats()
    assert figures is not None
    assert figures["a"]["k"] == 2 and figures["a"]["flaky"] == 1
    assert figures["a"]["pass_at_1"]["estimate"] == 0.75
    assert BatchView("x").repeats() is None


def test_the_follower_reads_only_whole_lines_and_starts_over_on_a_new_file(tmp_path: Path) -> None:
    logs = tmp_path / "batch-logs"
    logs.mkdir()
    (tmp_path / "batch-summary.json").write_text(json.dumps(summary(row("c1", "a"))))
    events = logs / "events.jsonl"
    events.write_bytes(
        b'{"event": "start", "case": "c1", "model": "a", "attempt": 1}\n{"event": "fin'
    )
    follower = BatchFollower(tmp_path)
    assert follower.poll()
    assert follower.view.overview(0)["totals"]["running"] == 1
    with events.open("ab") as file:  # the rest of the line arrives
        file.write(b'ish", "case": "c1", "model": "a", "status": "passed"}\n')
    assert follower.poll() and follower.view.overview(0)["totals"]["passed"] == 1
    assert not follower.poll()  # nothing new
    events.unlink()
    events.write_bytes(b'{"event": "skip", "case": "c1", "model": "a", "reason": "r"}\n')
    assert follower.poll() and follower.view.overview(0)["totals"]["skipped"] == 1


@pytest.mark.parametrize("secrets", [frozenset(), frozenset({"sk-secret-9876"})])
def test_the_log_tail_is_its_last_64_kib_and_says_whether_it_is_all(
    tmp_path: Path, secrets: frozenset[str]
) -> None:
    run = tmp_path / "m" / "c1-run"
    run.mkdir(parents=True)
    log = run / "output.log"
    log.write_bytes(b"a" * LOG_TAIL)
    whole = job_files(tmp_path, "m/c1-run", secrets)
    assert whole["log"] == "a" * LOG_TAIL and not whole["log_truncated"]
    log.write_bytes(b"b" + b"a" * LOG_TAIL)
    cut = job_files(tmp_path, "m/c1-run", secrets)
    assert cut["log"] == "a" * LOG_TAIL and cut["log_truncated"]


def test_job_files_stay_inside_the_batch_dir_and_are_redacted(tmp_path: Path) -> None:
    run = tmp_path / "m" / "c1-run"
    run.mkdir(parents=True)
    (run / "output.log").write_text("x" * 70_000 + "token sk-secret-9876\n")
    (run / "run-meta.json").write_text(json.dumps({"outcome": "passed", "note": "sk-secret-9876"}))
    got = job_files(tmp_path, "m/c1-run", frozenset({"sk-secret-9876"}))
    assert got["log"].endswith("token [REDACTED]\n") and got["log_truncated"]
    assert got["record"] == {"outcome": "passed", "note": "[REDACTED]"}
    outside = tmp_path.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "output.log").write_text("not yours")
    os.symlink(outside, tmp_path / "m" / "link")
    for hostile in ("../outside", "m/link", "/etc", "m/../../outside", "."):
        assert job_files(tmp_path, hostile, frozenset())["log"] is None, hostile
    os.symlink(outside / "output.log", run / "output.log.lnk")
    (run / "output.log").unlink()
    os.symlink(outside / "output.log", run / "output.log")
    assert job_files(tmp_path, "m/c1-run", frozenset())["log"] is None  # never through a link
    os.unlink(run / "output.log")
    os.mkfifo(run / "output.log")
    assert job_files(tmp_path, "m/c1-run", frozenset())["log"] is None  # a FIFO is not read


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"action": "launch"}, "unknown control 'launch'"),
        ({"action": "skip"}, "skip needs a model"),
        ({"action": "pause", "model": "m"}, "pause takes no model"),
        ({"action": "concurrency", "number": 0}, "concurrency: a whole number"),
        ({"action": "concurrency", "number": True}, "concurrency: a whole number"),
        ({"action": "concurrency", "number": 10**9}, "concurrency: a whole number"),
        ({"action": "pause", "extra": 1}, "unknown key 'extra'"),
        ([], "a control request is a JSON object"),
    ],
)
def test_a_bad_request_is_refused_with_its_reason(raw: Any, message: str) -> None:
    with pytest.raises(ControlError, match=message):
        parse_control(raw)


def test_requests_are_taken_once_in_order_and_junk_is_refused(tmp_path: Path) -> None:
    (tmp_path / "batch-logs").mkdir()
    write_request(tmp_path, Control("pause"))
    write_request(tmp_path, Control("concurrency", "m", 3))
    junk = tmp_path / "batch-logs" / "control" / "99999999999999999999-x.json"
    junk.write_bytes(b"{" * 5000)
    taken = take_requests(tmp_path)
    assert taken[:2] == [Control("pause"), Control("concurrency", "m", 3)]
    assert isinstance(taken[2], ControlError) and "larger than" in str(taken[2])
    assert take_requests(tmp_path) == []


def test_a_running_multi_step_job_shows_its_step() -> None:
    view = BatchView("b")
    view.load_summary(summary(row("c1", "a")))
    view.apply({"event": "start", "case": "c1", "model": "a", "attempt": 1}, 0)
    view.apply({"event": "step", "case": "c1", "model": "a", "step": "judge"}, 0)
    assert view.overview(0)["running"][0]["step"] == "judge"
    view.apply({"event": "finish", "case": "c1", "model": "a", "status": "passed"}, 0)
    assert view.overview(0)["running"] == [] and view.steps == {}


def test_a_pool_shows_its_limits_users_and_refusals_from_its_latest_event() -> None:
    view = BatchView("b")
    view.load_summary(summary(row("c1", "a")))
    fields = {"concurrency": 8, "rate": 6.0, "max_concurrent": 8, "max_rate": 6.0}
    view.apply({"event": "pool", "action": "join", "pool": "key", **fields,
                "sweeps": ["b"], "running": 0, "refused": 0}, 0)  # fmt: skip
    view.apply({"event": "pool", "action": "change", "pool": "key", **fields,
                "concurrency": 4, "rate": 4.2, "sweeps": ["b", "c"], "running": 3,
                "refused": 2, "reason": "rate-limited: lowered", "by": "c"}, 0)  # fmt: skip
    view.apply({"event": "pool", "pool": 7, "concurrency": "x"}, 0)  # no name: nothing
    assert view.overview(0)["pools"] == [
        {
            "pool": "key",
            "concurrency": 4,
            "rate": 4.2,
            "max_concurrent": 8,
            "max_rate": 6.0,
            "running": 3,
            "refused": 2,
            "sweeps": ["b", "c"],
        }
    ]


def test_a_models_interval_counts_a_cases_repeats_as_one_cluster_as_batch_stats_does() -> None:
    # Ten cases, each repeated three times with the same outcome: the repeats add no
    # information, so the interval is Wilson's on the ten cases, not on thirty samples.
    from statsmodels.stats.proportion import proportion_confint

    from batch.stats.rates import batch_stats

    rows = [row(f"c{i}", "a", "pending", repeat=r) for i in range(10) for r in (1, 2, 3)]
    view = BatchView("b")
    view.load_summary(summary(*rows))
    for i in range(10):
        for r in (1, 2, 3):
            view.apply({"event": "finish", "case": f"c{i}", "model": "a", "repeat": r,
                        "status": "passed" if i % 3 else "failed",
                        "duration_seconds": 1}, 0)  # fmt: skip
    (model,) = view.overview(0)["models"]
    low, high = proportion_confint(6, 10, alpha=0.05, method="wilson")
    assert (model["low"], model["high"]) == (round(low, 4), round(high, 4))
    # And what `batch stats` prints for the same jobs, with mixed repeats and errors.
    outcomes = ["passed", "failed", "error", "passed", "passed", "failed", "passed"]
    mixed = [row(f"c{i}", "m", outcomes[(i * r + i) % 7], repeat=r, duration_seconds=1.0)
             for i in range(12) for r in (1, 2, 3, 4)]  # fmt: skip
    view.load_summary(summary(*mixed))
    got = {m["model"]: m for m in view.overview(0)["models"]}["m"]
    (want,) = batch_stats(summary(*mixed))["models"]
    assert got["low"] == round(want["adjusted_pass_rate_low"], 4)
    assert got["high"] == round(want["adjusted_pass_rate_high"], 4)
    assert want["adjusted_pass_rate_method"] == "wilson-effective-n"
