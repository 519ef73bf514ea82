"""A resume tells "same sweep" by comparing the batch's snapshot with the sweep as data,
so an unchanged sweep of any size costs no YAML writing."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from batch.commands import run
from batch.layout import LOGS_DIR, SNAPSHOT
from batch.plan import planner
from batch.plan.planner import Plan, _compare_snapshot
from batch.sweep.load import load_sweep
from batch.sweep.snapshot import (
    read_snapshot,
    same_snapshot,
    snapshot_data,
    snapshot_text,
    sweep_snapshot,
)

SWEEP = """\
name: s
cases:
  - c01
  - {id: "a/b: c", timeout: 90.5, params: {difficulty: hard, n: 3, t: 0.25, ok: true, z: "007"}}
  - "2026-01-01"
models: [m1, {id: m2, env: {K: "${HOME}"}}]
command: [agent, "{case}"]
timeout: 1.5h
retry_backoff: 0.5
"""


def batch_with_snapshot(tmp_path: Path) -> tuple[Plan, Path]:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    sweep = load_sweep(path)
    batch_dir = tmp_path / "runs" / "s-20260101T000000Z"
    (batch_dir / LOGS_DIR).mkdir(parents=True)
    (batch_dir / SNAPSHOT).write_text(sweep_snapshot(sweep))
    return Plan(sweep=sweep, jobs=[], batch_dir=batch_dir, resuming=True), batch_dir


def test_a_snapshot_reads_back_as_its_sweeps_data(tmp_path: Path) -> None:
    plan, _ = batch_with_snapshot(tmp_path)
    text = sweep_snapshot(plan.sweep)
    assert read_snapshot(text) == snapshot_data(plan.sweep) == YAML(typ="safe").load(text)
    assert [type(v) for v in read_snapshot(text)["cases"][1]["params"].values()] == [
        str,
        int,
        float,
        bool,
        str,
    ]


def test_an_unchanged_sweep_is_compared_without_writing_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, batch_dir = batch_with_snapshot(tmp_path)

    def no_dump(*args: object, **kwargs: object) -> None:
        raise AssertionError("the snapshot was written as YAML again")

    monkeypatch.setattr(YAML, "dump", no_dump)
    assert _compare_snapshot(batch_dir, plan.sweep, {})[0] == []
    run._write_snapshot(plan)
    assert list((batch_dir / LOGS_DIR).iterdir()) == []  # no history copy


def test_a_changed_sweep_is_still_reported_and_kept(tmp_path: Path) -> None:
    plan, batch_dir = batch_with_snapshot(tmp_path)
    (tmp_path / "sweep.yaml").write_text(SWEEP.replace("timeout: 1.5h", "timeout: 2h"))
    plan.sweep = load_sweep(tmp_path / "sweep.yaml")
    assert _compare_snapshot(batch_dir, plan.sweep, {})[0] == ["timeout changed: 5400 s → 7200 s"]
    run._write_snapshot(plan)
    (copy,) = (batch_dir / LOGS_DIR).iterdir()
    assert copy.read_text() == sweep_snapshot(plan.sweep)


ODD = ["yes", "1.0", "", " lead", "a: b", "#x", "'s'", '"q"', "line1\nline2", "tab\there"]


@pytest.mark.parametrize("text", [*ODD, "é 日本語 😀", "a" * 300, "~", "2026-01-01"])
def test_odd_values_read_back_as_written(text: str) -> None:
    # Written by libyaml's emitter when it reads back, else by ruamel's: either way the
    # snapshot holds exactly the value.
    data = {"cases": [{"id": "c", "params": {"k": text}}, text], "env": {"K": text}}
    assert read_snapshot(snapshot_text(data)) == data


def test_an_unchanged_sweep_is_compared_by_its_digest_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, batch_dir = batch_with_snapshot(tmp_path)

    def no_parse(text: str) -> None:
        raise AssertionError("the snapshot's YAML was parsed")

    monkeypatch.setattr(planner, "read_snapshot", no_parse)
    assert _compare_snapshot(batch_dir, plan.sweep, {}) == ([], True)


def test_a_snapshot_edited_below_its_digest_is_compared_by_reading_it(tmp_path: Path) -> None:
    plan, batch_dir = batch_with_snapshot(tmp_path)
    text = (batch_dir / SNAPSHOT).read_text()
    assert text.splitlines()[1].startswith("# digest: sha256 ")
    # The digest line kept, the data below it changed by hand: the digest no longer vouches.
    (batch_dir / SNAPSHOT).write_text(text.replace("timeout: 5400", "timeout: 7200"))
    assert _compare_snapshot(batch_dir, plan.sweep, {}) == (
        ["timeout changed: 7200 s → 5400 s"],
        False,
    )


def test_a_snapshot_without_a_digest_is_still_compared_as_data(tmp_path: Path) -> None:
    plan, batch_dir = batch_with_snapshot(tmp_path)
    lines = (batch_dir / SNAPSHOT).read_text().splitlines(keepends=True)
    (batch_dir / SNAPSHOT).write_text(lines[0] + "".join(lines[2:]))  # as older versions wrote
    assert _compare_snapshot(batch_dir, plan.sweep, {}) == ([], True)
    (tmp_path / "sweep.yaml").write_text(SWEEP.replace("timeout: 1.5h", "timeout: 2h"))
    plan.sweep = load_sweep(tmp_path / "sweep.yaml")
    assert _compare_snapshot(batch_dir, plan.sweep, {}) == (
        ["timeout changed: 5400 s → 7200 s"],
        False,
    )


def test_the_digest_vouches_only_for_the_data_written() -> None:
    text = snapshot_text({"timeout": 1.5, "cases": ["c"]})
    assert same_snapshot(text, {"timeout": 1.5, "cases": ["c"]})
    assert not same_snapshot(text, {"timeout": 2, "cases": ["c"]})
    assert not same_snapshot(text, {"timeout": 1.5, "cases": ["c", "d"]})
