"""Every mistake of a sweep file in one run, each with a way out (issue: a first hour
without stumbles). Through the real ``batch plan`` command: stderr, exit status 2, and
nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _env


def plan(directory: Path, text: str) -> subprocess.CompletedProcess[str]:
    (directory / "s.yaml").write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "batch.cli", "plan", "s.yaml"],
        capture_output=True,
        text=True,
        cwd=directory,
        env=_env(None),
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (directory / "runs").exists()
    return done


@pytest.fixture
def cases(tmp_path: Path) -> Path:
    (tmp_path / "cases").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "cases" / f"{name}.json").write_text("{}")
    return tmp_path


HEAD = 'name: t\ncases: {dir: cases, glob: "*.json"}\nmodels: [m]\n'


def test_two_placeholder_typos_are_both_named_in_one_run(cases: Path) -> None:
    err = plan(cases, HEAD + 'command: [agent, "{cse}", --out, "{rundir}", "{modle}{atempt}"]\n')
    lines = err.stderr.splitlines()
    assert lines[0].startswith("s.yaml:4:18: command[1]: unknown placeholder {cse}")
    assert "(did you mean {case}?)" in lines[0]
    assert lines[1].startswith("s.yaml:4:34: command[3]: unknown placeholder {rundir}")
    assert "(did you mean {run_dir}?)" in lines[1]
    assert "unknown placeholders {modle} (did you mean {model}?), {atempt}" in lines[2]
    assert "(did you mean {attempt}?)" in lines[2]
    assert len(lines) == 3


def test_a_tab_in_the_indentation_is_said_to_be_a_tab(cases: Path) -> None:
    err = plan(cases, HEAD + "command: [agent]\nenv:\n\tKEY: value\n")
    (line,) = err.stderr.splitlines()
    assert line.startswith("s.yaml:6:1: not valid YAML")
    assert "YAML indents with spaces only (replace the tabs with spaces)" in line


def test_a_misspelt_cases_dir_names_the_directory_that_exists(cases: Path) -> None:
    err = plan(cases, 'name: t\ncases: {dir: casse, glob: "*.json"}\nmodels: [m]\ncommand: [a]\n')
    (line,) = err.stderr.splitlines()
    assert line == (
        f"s.yaml:2:14: cases.dir: {cases / 'casse'} is not a directory "
        f"(did you mean {str(cases / 'cases')!r}?)"
    )


def test_a_glob_that_matches_nothing_offers_the_glob_that_would(cases: Path) -> None:
    err = plan(cases, 'name: t\ncases: {dir: cases, glob: "*.yaml"}\nmodels: [m]\ncommand: [a]\n')
    (line,) = err.stderr.splitlines()
    assert line.endswith("matches '*.yaml' (it holds 3 entries; 3 would match glob: \"*.json\")"), (
        line
    )


def test_unknown_keys_list_the_known_ones_once(cases: Path) -> None:
    err = plan(cases, HEAD + "command: [a]\nzzzz: 1\nqqqq: 2\nretires: 3\n")
    lines = err.stderr.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("s.yaml:5:1: unknown key 'zzzz' (known keys: name, output, cases")
    assert lines[1] == "s.yaml:6:1: unknown key 'qqqq' (the known keys are listed above)"
    assert lines[2] == "s.yaml:7:1: unknown key 'retires' (did you mean 'retries'?)"
    assert sum(line.count("max_concurrent") for line in lines) == 1
