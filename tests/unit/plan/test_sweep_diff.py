"""What a resume under a changed sweep reports, from two snapshots as plain data."""

from __future__ import annotations

from typing import Any

from batch.plan.sweep_diff import sweep_changes


def snapshot(
    cases: list[Any] | None = None, models: list[str] | None = None, **keys: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "s",
        "cases": [c if isinstance(c, dict) else {"id": c, "params": {}} for c in cases or []],
        "models": [{"id": m, "max_concurrent": None, "env": {}} for m in models or []],
        "command": ["agent", "{case}", "{model}"],
        "timeout": 600,
    }
    data.update(keys)
    return data


CASES = [f"c{n:02}" for n in range(12)]


def test_the_same_sweep_has_no_changes() -> None:
    assert sweep_changes(snapshot(CASES, ["mock/a"]), snapshot(CASES, ["mock/a"])) == []


def test_an_added_model_says_how_many_jobs_it_brings() -> None:
    old, new = snapshot(CASES, ["mock/a"]), snapshot(CASES, ["mock/a", "mock/new"])
    assert sweep_changes(old, new) == ["+ model mock/new (12 jobs)"]


def test_a_removed_model_says_its_recorded_runs_are_kept_out_of_the_summary() -> None:
    old, new = snapshot(CASES, ["mock/a", "mock/old"]), snapshot(CASES, ["mock/a"])
    lines = sweep_changes(old, new, recorded_models={"mock/a": 12, "mock/old": 12})
    assert lines == ["- model mock/old: 12 recorded runs kept, left out of the summary"]


def test_cases_added_and_removed_one_line_each_when_few() -> None:
    old, new = snapshot(["a", "b", "c"], ["m"]), snapshot(["a", "c", "d"], ["m"])
    lines = sweep_changes(old, new, recorded_cases={"b": 1})
    assert lines == ["+ case d (1 job)", "- case b: 1 recorded run kept, left out of the summary"]


def test_many_cases_added_or_removed_are_counted_on_one_line() -> None:
    old = snapshot(["keep", *[f"old{n}" for n in range(10)]], ["m1", "m2"])
    new = snapshot(["keep", *[f"new{n}" for n in range(40)]], ["m1", "m2"])
    lines = sweep_changes(old, new, recorded_cases={f"old{n}": 2 for n in range(10)})
    assert lines == [
        "+ 40 cases: new0, new1, new2, … and 37 more (80 jobs)",
        "- 10 cases: old0, old1, old2, … and 7 more: "
        "20 recorded runs kept, left out of the summary",
    ]


def test_a_changed_command_says_carried_results_came_from_the_old_one() -> None:
    old = snapshot(["a"], ["m"])
    new = snapshot(["a"], ["m"], command=["agent", "--v2", "{case}", "{model}"])
    assert sweep_changes(old, new) == [
        "command changed: carried results came from the old command",
        "  was: agent '{case}' '{model}'",
        "  now: agent --v2 '{case}' '{model}'",
    ]


def test_changed_params_of_a_case_are_reported() -> None:
    old = snapshot([{"id": "a", "params": {"lang": "en"}}], ["m"])
    new = snapshot([{"id": "a", "params": {"lang": "de"}}], ["m"])
    assert sweep_changes(old, new) == ["params changed for case a"]


def test_timeouts_of_the_sweep_and_of_a_case() -> None:
    old = snapshot([{"id": "a", "params": {}}, {"id": "b", "params": {}}], ["m"])
    new = snapshot(
        [{"id": "a", "timeout": 30, "params": {}}, {"id": "b", "params": {}}], ["m"], timeout=900
    )
    assert sweep_changes(old, new) == [
        "timeout changed: 600 s → 900 s",
        "timeout changed for case a: the sweep's → 30 s",
    ]


def step(name: str, command: list[str], timeout: int | None = None) -> dict[str, Any]:
    return {"name": name, "command": command, "timeout": timeout, "expect": []}


def test_changed_steps_name_each_change() -> None:
    old = snapshot(["a"], ["m"], command=None)
    old["steps"] = [step("eval", ["eval"]), step("judge", ["judge"]), step("lint", ["lint"])]
    new = snapshot(["a"], ["m"], command=None)
    new["steps"] = [
        step("eval", ["eval"], 60),
        step("judge", ["judge", "--strict"]),
        step("x", ["x"]),
    ]
    del old["command"], new["command"]
    assert sweep_changes(old, new) == [
        "steps changed: + step x; - step lint; eval timeout none → 60 s; judge command: "
        "carried results came from the old steps"
    ]


def test_a_command_replaced_by_steps() -> None:
    old = snapshot(["a"], ["m"])
    new = snapshot(["a"], ["m"], steps=[step("eval", ["eval"]), step("judge", ["judge"])])
    del new["command"]
    assert sweep_changes(old, new) == [
        "command changed to steps (eval, judge): carried results came from the old command"
    ]


DATASET = {"jsonl": "/d/data.jsonl", "id": "task_id", "rows": 2, "fingerprint": "sha256:aa"}


def test_a_dataset_is_compared_by_its_file_id_field_and_fingerprint() -> None:
    old = {"cases": DATASET, "models": ["m1"], "command": ["x"]}
    assert sweep_changes(old, old) == []
    grown = {**old, "cases": {**DATASET, "rows": 3, "fingerprint": "sha256:bb"}}
    assert sweep_changes(old, grown) == [
        "dataset changed: content changed (2 → 3 rows): carried results came from the old rows"
    ]
    renamed = {**old, "cases": {**DATASET, "jsonl": "/d/other.jsonl", "id": "name"}}
    assert sweep_changes(old, renamed) == [
        "dataset changed: file /d/data.jsonl → /d/other.jsonl; id field task_id → name: "
        "carried results came from the old rows"
    ]


def test_a_list_replaced_by_a_dataset_and_a_model_added_to_a_dataset() -> None:
    listed = {"cases": ["a", "b"], "models": ["m1"], "command": ["x"]}
    dataset = {**listed, "cases": DATASET}
    assert sweep_changes(listed, dataset) == [
        "cases changed from a list of 2 cases to dataset /d/data.jsonl: "
        "carried results came from the old cases"
    ]
    assert sweep_changes(dataset, {**dataset, "models": ["m1", "m2"]}) == ["+ model m2 (2 jobs)"]
