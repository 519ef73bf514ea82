"""batch.sweep.yaml_fast: the same values, lines, columns and errors as the round-trip reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO_ROOT, TEST_DATA
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from batch.errors import SweepError
from batch.sweep import yaml_fast
from batch.sweep.yaml_reader import read_yaml

DATA = TEST_DATA
EXAMPLES = REPO_ROOT / "examples"
SWEEP_FILES = sorted(DATA.rglob("*.yaml")) + sorted(EXAMPLES.rglob("*.yaml"))


def located(value: Any) -> Any:
    """The value with every key's, value's and item's line and column, and its type."""
    if isinstance(value, CommentedMap):
        items = [(k, type(k), value.lc.data.get(k), located(v)) for k, v in value.items()]
        return ("map", value.lc.line, value.lc.col, items)
    if isinstance(value, CommentedSeq):
        items = [(tuple(value.lc.data[i]), located(v)) for i, v in enumerate(value)]
        return ("seq", value.lc.line, value.lc.col, items)
    return (type(value), value)


def outcome(read: Any, path: Path, *, compare_values: bool = True) -> Any:
    try:
        data, lines = read(path, "sweep.yaml")
    except SweepError as exc:
        return ("error", str(exc))
    return ("ok", located(data) if compare_values else None, lines)


def took_fast_path(path: Path) -> bool:
    try:
        text = path.read_bytes().decode("utf-8-sig")
        yaml_fast._Builder(text).document()
    except yaml_fast._TooDeep:
        return True  # refused on the fast path, with the round-trip reader's words and place
    except (yaml_fast._Unhandled, YAMLError, UnicodeDecodeError):
        return False
    return True


def test_the_c_parser_is_installed() -> None:
    # ruamel.yaml.clib is a dependency: without it every read is the slow one.
    assert yaml_fast.CParser is not None


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.name)
def test_every_sweep_file_reads_the_same(path: Path) -> None:
    # An alias bomb's values are shared exponentially: compare it by its outcome only.
    whole = path.name != "alias_bomb.yaml"
    expected = outcome(read_yaml, path, compare_values=whole)
    assert outcome(yaml_fast.read_yaml_fast, path, compare_values=whole) == expected


def test_most_sweep_files_take_the_fast_path() -> None:
    fast = [path.name for path in SWEEP_FILES if took_fast_path(path)]
    assert "sweep.yaml" in fast  # the examples
    assert len(fast) >= 30


PLAIN = """\
# a comment
name: täst   # non-ASCII before a value on the same line
models: [m1, "m2", {id: m3, max_concurrent: 2}]
command: [echo, '{case}']
timeout: 5m
retries: 0x1F
stagger: 1_000
kill_grace: 1.50
order: .inf
flags: [true, false, null, ~, yes, 2020-01-01, "007", 007, -0, 1e3]
cases:
- id: été-1
  params: {prompt: "naïve \\u00e9", n: 3}
- id: 2
  timeout: |
    line one
    line two
- id: c3
  params:
    folded: >
      one
      two
    empty: ''
    key with spaces: value with spaces
env: {}
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_plain_files_take_the_fast_path_with_the_same_values_and_places(
    tmp_path: Path, newline: str, bom: str
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_bytes((bom + PLAIN.replace("\n", newline)).encode())
    assert took_fast_path(path)
    assert outcome(yaml_fast.read_yaml_fast, path) == outcome(read_yaml, path)


@pytest.mark.parametrize(
    "text",
    [
        "%YAML 1.1\n---\ncases: [yes]\n",  # a directive changes what "yes" is
        "---\ncases: [a]\n...\n",
        "cases: &c [a]\nmodels: *c\n",
        "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
        "cases: [a]\ncases: [b]\n",
        "cases: [a]\ntimeout:\nretries: 1\n",  # libyaml places an empty value elsewhere
        "cases: !!str 5\n",
        "cases: !custom x\n",
        'cases: ["\\ud800"]\n',
        "? [a]\n: b\n",
        "cases: [a\n",
        "cases: [a]\n---\nmore: 1\n",
        "cases:\n\t- a\n",
    ],
)
def test_what_the_fast_path_leaves_reads_as_the_round_trip_reader_reads_it(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    assert not took_fast_path(path)
    assert outcome(yaml_fast.read_yaml_fast, path) == outcome(read_yaml, path)


TOO_DEEP = {
    "a flow list of cases": "cases: " + "[" * 3000 + "]" * 3000 + "\n",
    "flow lists in a case's params": "cases:\n- id: c\n  params: {a: " + "[" * 150 + "]" * 150
    + "}\nmodels: [m]\n",
    "flow mappings in a model's env": "models: [{id: m, env: " + "{A: " * 150 + "x" + "}" * 150
    + "}]\n",
    "block lists": "command:" + "".join(f"\n{' ' * level}-" for level in range(150)) + " x\n",
}  # fmt: skip


@pytest.fixture(scope="module")
def too_deep_read(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The round-trip reader's outcome for each shape: the slow read, done once for both
    ``plain_key`` runs (the outcome names the file by its display name, not its path)."""
    read = {}
    for shape, text in TOO_DEEP.items():
        path = tmp_path_factory.mktemp("too-deep") / "sweep.yaml"
        path.write_text(text)
        read[shape] = outcome(read_yaml, path)
    return read


# One worker under `pytest -n`: the module fixture's slow reads once, not once a worker.
@pytest.mark.xdist_group("too-deep-yaml")
@pytest.mark.parametrize("shape", sorted(TOO_DEEP))
@pytest.mark.parametrize("plain_key", [None, "cases"])
def test_nesting_too_deep_is_refused_fast_where_the_round_trip_reader_refuses_it(
    tmp_path: Path, shape: str, plain_key: str | None, too_deep_read: dict[str, Any]
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(TOO_DEEP[shape])
    expected = too_deep_read[shape]
    assert expected[0] == "error" and "nesting too deep (more than 100 levels" in expected[1]
    assert took_fast_path(path)
    fast = outcome(lambda p, f: yaml_fast.read_yaml_fast(p, f, plain_key), path)
    assert fast == expected


def test_unreadable_and_non_utf8_files_give_the_same_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    assert outcome(yaml_fast.read_yaml_fast, missing) == outcome(read_yaml, missing)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"cases: [a]\nname: \xff\n")
    assert outcome(yaml_fast.read_yaml_fast, bad) == outcome(read_yaml, bad)
    assert outcome(read_yaml, bad)[0] == "error"


def test_a_big_case_list_takes_the_fast_path(tmp_path: Path) -> None:
    lines = ["cases:"]
    for index in range(300):  # n: 0 is a ScalarInt to ruamel, n: 1 an int
        lines += [f"- id: case-{index}", "  params:", f"    n: {index - 1}", "    t: 0.5"]
    path = tmp_path / "sweep.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert took_fast_path(path)
    assert outcome(yaml_fast.read_yaml_fast, path) == outcome(read_yaml, path)
