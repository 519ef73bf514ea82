"""Run dir names read like the case and model, are unique, and cannot leave the batch dir."""

from __future__ import annotations

import re

import pytest
from helpers.paths import REPO_ROOT
from hypothesis import given
from hypothesis import strategies as st

from batch import layout
from batch.layout import MAX_NAME, model_dir_name, run_dir_name, run_stamp, safe_name
from run_support import ledger_scan, names, results

SAFE = re.compile(r"[A-Za-z0-9._-]+")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai/gpt-4o", "openai--gpt-4o"),
        ("qwen3:8b", "qwen3--8b"),
        ("mock/oracle", "mock--oracle"),
        ("c01", "c01"),
        ("a b", "a-b"),
        ("é", "-"),
        ("$(touch pwned)", "--touch-pwned-"),
    ],
)
def test_names_keep_their_shape(name: str, expected: str) -> None:
    assert safe_name(name) == expected


@pytest.mark.parametrize("name", ["", ".", "..", ".hidden", "../../etc", "/", "a/../../b"])
def test_no_name_is_empty_hidden_or_a_path(name: str) -> None:
    safe = safe_name(name)
    assert safe and not safe.startswith(".") and "/" not in safe
    assert safe not in (".", "..")


@given(st.text())
def test_any_name_becomes_one_harmless_path_component(name: str) -> None:
    safe = safe_name(name)
    assert SAFE.fullmatch(safe)
    assert not safe.startswith(".")
    assert len(safe) <= MAX_NAME


def test_long_names_are_cut_and_stay_distinct() -> None:
    first, second = "x" * 200 + "a", "x" * 200 + "b"
    assert len(safe_name(first)) == MAX_NAME
    assert safe_name(first) != safe_name(second)
    assert safe_name(first).startswith("x" * 60)


def test_a_model_named_like_a_driver_dir_gets_its_own_dir() -> None:
    assert model_dir_name("batch-logs") != "batch-logs"
    assert model_dir_name("openai/gpt-4o") == "openai--gpt-4o"


def test_run_dir_name_has_case_model_stamp_and_attempt() -> None:
    stamp = run_stamp(1_796_008_500.123456)
    assert stamp == "20261130T031500123456Z"
    name = run_dir_name("c01", "openai/gpt-4o", stamp, 2)
    assert name == "c01-openai--gpt-4o-20261130T031500123456Z-a2"


def test_each_batch_dir_name_is_spelled_once() -> None:
    # A second spelling drifts: a rename in one place would leave resume reading one name
    # and the driver writing another. Only layout.py and the ledger's names.py spell them.
    names = {
        value
        for key, value in vars(layout).items()
        if key.isupper() and isinstance(value, str) and key != "MAX_NAME"
    }
    literal = re.compile("|".join(re.escape(f'"{name}"') for name in sorted(names)))
    spelled = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for root in ("batch", "run_support")
        for path in sorted((REPO_ROOT / root).rglob("*.py"))
        if path.name not in ("layout.py", "names.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert spelled == []


def test_the_ledger_skips_the_driver_dir_layout_names() -> None:
    assert layout.LOGS_DIR in ledger_scan.NOT_MODEL_DIRS
    assert layout.RUN_META == results.RUN_META == "run-meta.json"
    assert layout.OLD_CACHE_NAMES == names.OLD_CACHE_NAMES
