"""Big case lists: read without positions, converted in one plain loop, and every problem
still reported by the located read, word for word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from batch.errors import SweepError
from batch.sweep import cases as cases_module
from batch.sweep import load, nodes
from batch.sweep.load import CaseSpec, load_sweep

HEAD = "models: [m1]\ncommand: [echo, '{case}']\n"


def located_load(path: Path) -> Any:
    """What the loader gives when it reads every value with its line and column."""
    return load._load(nodes.read_document(path), path)


def located_error(path: Path) -> str:
    with pytest.raises(SweepError) as caught:
        located_load(path)
    return str(caught.value)


def write(tmp_path: Path, cases: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(HEAD + "cases:" + cases, encoding="utf-8")
    return path


def test_case_objects_are_read_once_and_equal_the_located_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = "".join(
        f"- id: case-{i}\n  timeout: 90s\n  params:\n    prompt: task {i}\n    seed: {i}\n"
        "    t: 0.5\n    strict: true\n    block: |\n      two\n      lines\n"
        for i in range(50)
    )
    path = write(tmp_path, "\n" + cases + "- plain-id\n")
    reads = []
    real = nodes.read_yaml_fast

    def counted(*args: Any) -> Any:
        reads.append(args)
        return real(*args)

    located_cases = []
    real_case = cases_module._case
    monkeypatch.setattr(nodes, "read_yaml_fast", counted)
    monkeypatch.setattr(
        cases_module, "_case", lambda node: located_cases.append(1) or real_case(node)
    )
    sweep = load_sweep(path)
    assert len(reads) == 1  # no second, located read
    assert not located_cases  # no case went through the located, per-node converter
    monkeypatch.undo()
    assert sweep == located_load(path)
    assert sweep.cases[0] == CaseSpec(
        id="case-0",
        timeout=90.0,
        params={"prompt": "task 0", "seed": 0, "t": 0.5, "strict": True, "block": "two\nlines\n"},
    )
    assert [type(v) for v in sweep.cases[0].params.values()] == [str, int, float, bool, str]
    assert sweep.cases[-1] == CaseSpec(id="plain-id")


@pytest.mark.parametrize(
    ("cases", "message"),
    [
        ("- a\n- b\n- a\n", "sweep.yaml:6:3: cases[2]: duplicate case id 'a' (first at line 4)"),
        (" []\n", "sweep.yaml:3:8: cases: is empty"),
        ("- {id: a, timeout: 0}\n", "sweep.yaml:4:20: cases[0].timeout: must be more than 0"),
        ("- {id: a, timeout: null}\n", "cases[0].timeout: expected a duration"),
        ("- {id: a, timout: 5}\n", "sweep.yaml:4:11: unknown key 'timout' in cases[0]"),
        ("- {id: a, params: [x]}\n", "cases[0].params: expected a mapping, got a list"),
        ("- {id: a, params: {x: [1]}}\n", "cases[0].params.x: expected a string, number or"),
        ("- {timeout: 5}\n", "sweep.yaml:4:3: cases[0]: missing required key 'id'"),
        ("- ''\n", "sweep.yaml:4:3: cases[0]: the case id is empty"),
        ("- true\n", "sweep.yaml:4:3: cases[0]: expected a case id (a string or number)"),
        ('- {id: "a\\nb"}\n', "cases[0].id: the case id contains a NUL or line break"),
    ],
)
def test_a_bad_case_gets_the_located_message(tmp_path: Path, cases: str, message: str) -> None:
    path = write(tmp_path, cases if cases.startswith(" ") else "\n" + cases)
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    assert str(caught.value) == located_error(path)
    assert message in str(caught.value)


def test_a_number_as_id_keeps_its_source_text(tmp_path: Path) -> None:
    """Only the located read has the token as written: the plain loop hands it over."""
    path = write(tmp_path, "\n- {id: a}\n- {id: 007}\n- 1.10\n")
    assert [case.id for case in load_sweep(path).cases] == ["a", "007", "1.10"]
