"""``docs/schemas/sweep.schema.json``, the sweep file's JSON Schema for editors: it is a
valid schema, it names every key the loader accepts (and no other), and every example sweep
and every sweep snippet in the docs passes it, while the docs' deliberate mistakes fail."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO_ROOT
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML

from batch.errors import SweepError
from batch.sweep.keys import KEYS
from batch.sweep.load import load_sweep
from batch.sweep.schema import schema_text

SCHEMA = json.loads((REPO_ROOT / "docs" / "schemas" / "sweep.schema.json").read_text())
VALIDATOR = Draft202012Validator(SCHEMA)
#: A top-level snippet (``halt: soon,fail=3``) is part of a sweep, not a whole one.
FRAGMENT = Draft202012Validator({k: v for k, v in SCHEMA.items() if k not in ("required", "oneOf")})
#: The docs' examples of a broken sweep file (docs/sweep-file.md, "Errors").
MEANT_TO_FAIL = {"typo.yaml", "two-typos.yaml", "bad-timeout.yaml"}
_YAML = YAML(typ="safe")
_BASE = "cases: [c1]\nmodels: [m]\ncommand: [x]\n"


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)


def known_keys(tmp_path: Path, sweep: str) -> list[str]:
    """The keys the loader accepts where ``zzzz_unknown`` stands in ``sweep``: read from
    its own "unknown key ... (known keys: ...)" error."""
    path = tmp_path / "sweep.yaml"
    path.write_text(sweep)
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    lines = [line for line in caught.value.lines() if "zzzz_unknown" in line]
    assert len(lines) == 1, caught.value.lines()
    match = re.search(r"\(known keys: (.*)\)$", lines[0])
    assert match, lines[0]
    return match[1].split(", ")


def schema_keys(*path: str | int) -> list[str]:
    """The property names of the object schema at ``path`` in the schema document (a
    ``$ref`` on the way, or at the end, is followed)."""
    node: Any = SCHEMA
    for step in path:
        node = _resolved(node)[step]
    return list(_resolved(node)["properties"])


def _resolved(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


MODEL = "cases: [c1]\ncommand: [x]\nmodels: [{id: m, %s}]\n"
P = "properties"
CASE = ("$defs", "case", "anyOf", 1)
MODEL_ = ("$defs", "model", "anyOf", 1)
SIDE = ("$defs", "side_command", "anyOf", 2)
PLACES = [
    ("top level", _BASE + "zzzz_unknown: 1\n", ()),
    ("a case", "cases: [{id: c1, zzzz_unknown: 1}]\nmodels: [m]\ncommand: [x]\n", CASE),
    (
        "cases: {dir, glob}",
        "cases: {dir: ., glob: x, zzzz_unknown: 1}\nmodels: [m]\ncommand: [x]\n",
        (P, "cases", "anyOf", 1),
    ),
    (
        "cases: {jsonl, id}",
        "cases: {jsonl: x, id: y, zzzz_unknown: 1}\nmodels: [m]\ncommand: [x]\n",
        (P, "cases", "anyOf", 2),
    ),
    ("a model", MODEL % "zzzz_unknown: 1", MODEL_),
    (
        "a model's adaptive",
        MODEL % "adaptive: {zzzz_unknown: 1}",
        (*MODEL_, P, "adaptive", "anyOf", 1),
    ),
    ("a model's budget", MODEL % "budget: {zzzz_unknown: 1}", ("$defs", "budget")),
    (
        "a model's between_models",
        MODEL % "between_models: {zzzz_unknown: 1}",
        (*MODEL_, P, "between_models"),
    ),
    (
        "a step",
        "cases: [c1]\nmodels: [m]\nsteps: [{name: a, command: [x], zzzz_unknown: 1}]\n",
        ("$defs", "step"),
    ),
    ("notify", _BASE + "notify: {commands: [x], zzzz_unknown: 1}\n", (P, "notify", "anyOf", 3)),
    ("executor", _BASE + "executor: {kind: slurm, zzzz_unknown: 1}\n", (P, "executor", "anyOf", 1)),
    (
        "executor.adaptive",
        _BASE + "executor: {kind: slurm, adaptive: {maximum: 2, zzzz_unknown: 1}}\n",
        (P, "executor", "anyOf", 1, P, "adaptive"),
    ),
    (
        "between_models",
        _BASE + "order: model-major\nbetween_models: {zzzz_unknown: 1}\n",
        ("$defs", "between_models"),
    ),
    (
        "settle",
        _BASE + "order: model-major\nbetween_models: {settle: {zzzz_unknown: 1}}\n",
        ("$defs", "settle", "anyOf", 1),
    ),
    (
        "reset",
        _BASE + "order: model-major\nbetween_models: {reset: {command: [x], zzzz_unknown: 1}}\n",
        SIDE,
    ),
    ("probe", _BASE + "probe: {command: [x], zzzz_unknown: 1}\n", SIDE),
    ("breaker", _BASE + "breaker: {zzzz_unknown: 1}\n", ("$defs", "breaker", "anyOf", 2)),
    ("halt", _BASE + "halt: {zzzz_unknown: 1}\n", (P, "halt", "anyOf", 2)),
    ("budget", _BASE + "budget: {zzzz_unknown: 1}\n", ("$defs", "budget")),
    (
        "containers",
        _BASE + "containers: {engine: podman, zzzz_unknown: 1}\n",
        (P, "containers", "anyOf", 1),
    ),
]


@pytest.mark.parametrize(("place", "sweep", "path"), PLACES, ids=[p[0] for p in PLACES])
def test_the_schema_names_every_key_the_loader_accepts(
    tmp_path: Path, place: str, sweep: str, path: tuple[str, ...]
) -> None:
    assert sorted(schema_keys(*path)) == sorted(known_keys(tmp_path, sweep)), place


def test_every_key_has_a_description() -> None:
    def walk(node: Any, where: str) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.get("properties", {}).items():
                if "description" not in value and "$ref" not in value:
                    yield f"{where}.{key}"
            for key, value in node.items():
                yield from walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{where}[{i}]")

    assert list(walk(SCHEMA, "")) == []
    top = SCHEMA["properties"]
    assert [k for k in top if "description" not in top[k] and "$ref" not in top[k]] == []


# --- the sweeps the project shows ---------------------------------------------------------


def example_sweeps() -> list[Path]:
    return sorted((REPO_ROOT / "examples").glob("*/sweep*.yaml"))


@pytest.mark.parametrize("path", example_sweeps(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_example_sweep_passes(path: Path) -> None:
    errors = [e.message for e in VALIDATOR.iter_errors(_YAML.load(path.read_text()))]
    assert errors == []


def doc_snippets() -> Iterator[tuple[str, str, str | None]]:
    """(where, YAML text, file name) of every ```yaml block and every hidden doccheck file
    ending in .yaml in README.md and docs/."""
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        lines = doc.read_text().splitlines()
        name = None
        i = 0
        while i < len(lines):
            line = lines[i]
            hidden = re.fullmatch(r"<!-- doccheck file: (\S+\.ya?ml)\s*", line)
            shown = re.fullmatch(r"<!-- doccheck file: (\S+)\s*-->\s*", line)
            if hidden:
                end = lines.index("-->", i)
                yield f"{doc.name}:{i + 1}", "\n".join(lines[i + 1 : end]), hidden[1]
                i = end
            elif shown:
                name = shown[1]
            elif line.strip() == "```yaml":  # also indented, inside a list item
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                block = textwrap.dedent("\n".join(lines[i + 1 : end]))
                yield f"{doc.name}:{i + 1}", block, name
                name = None
                i = end
            elif line.startswith("```"):
                name = None
            i += 1


def _chunks(text: str) -> Iterator[str]:
    """The top-level entries of a snippet one by one (a snippet may show alternatives of
    one key, as ``halt: soon,fail=3`` then ``halt: now,error=10%``)."""
    chunk: list[str] = []
    for line in text.splitlines():
        if line[:1].isalpha() and chunk:
            yield "\n".join(chunk)
            chunk = []
        chunk.append(line)
    if chunk:
        yield "\n".join(chunk)


SNIPPETS = list(doc_snippets())


@pytest.mark.parametrize(("where", "text", "name"), SNIPPETS, ids=[s[0] for s in SNIPPETS])
def test_every_sweep_snippet_in_the_docs_passes(where: str, text: str, name: str | None) -> None:
    try:
        whole = _YAML.load(text)
    except Exception:  # duplicate keys: alternatives of one key, each checked alone
        whole = None
    if isinstance(whole, dict) and {"cases", "models"} <= set(whole):
        errors = [e.message for e in VALIDATOR.iter_errors(whole)]
    else:
        errors = [
            e.message for chunk in _chunks(text) for e in FRAGMENT.iter_errors(_YAML.load(chunk))
        ]
    if name in MEANT_TO_FAIL:
        assert errors, f"{where}: {name} shows a mistake, and the schema should see it"
    else:
        assert errors == [], where


def test_the_docs_have_sweep_snippets_to_check() -> None:
    # The collection above found them: a change of the docs' markup must not empty it.
    assert len(SNIPPETS) >= 20
    assert {name for _, _, name in SNIPPETS} >= MEANT_TO_FAIL


def test_the_committed_schema_is_the_one_the_key_table_makes() -> None:
    """The schema is generated from the declarations (``python -m batch.sweep.schema
    --write``); a key added or changed without regenerating it fails here."""
    committed = (REPO_ROOT / "docs" / "schemas" / "sweep.schema.json").read_text(encoding="utf-8")
    assert committed == schema_text(), (
        "run: python -m batch.sweep.schema > docs/schemas/sweep.schema.json"
    )


DEFAULTED = [key for key, row in KEYS.items() if "default" in row.schema()]


@pytest.mark.parametrize("key", DEFAULTED)
def test_a_keys_published_default_is_what_leaving_the_key_out_gives(
    tmp_path: Path, key: str
) -> None:
    """The default the schema (and so an editor) shows is the loader's: a sweep that
    writes it loads as one that leaves the key out."""
    path = tmp_path / "sweep.yaml"
    path.write_text(_BASE)
    without = load_sweep(path)
    path.write_text(_BASE + f"{key}: {json.dumps(KEYS[key].schema()['default'])}\n")
    assert load_sweep(path) == without


def test_every_top_level_key_says_what_it_is_for() -> None:
    for key, row in KEYS.items():
        assert row.doc and "\n" not in row.doc, key
