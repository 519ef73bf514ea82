"""Every module the docs name exists: a moved or renamed module fails here, not in a reader's
hands.

Checks README.md and docs/*.md for file paths (``batch/plan/resume.py``,
``tests/e2e/test_chaos.py``, ``run_support/results.py``, ``bench/overhead.py``) and dotted
names (``batch.plan.resume.apply_resume``, ``run_support.results``). A dotted name is either a
module or package, or a module followed by one name defined at its top level (a function,
class or assignment). Static: nothing is imported.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from helpers.paths import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]

PATH = re.compile(r"\b(?:batch|run_support|tests|bench|examples|scripts)/[\w./-]*\.py\b")
DOTTED = re.compile(r"(?<![\w./-])(?:batch|run_support)(?:\.\w+)+")
#: ``batch.fish`` and the like are file names, not modules.
FILE_SUFFIXES = {"fish", "bash", "zsh", "yaml", "yml", "json", "jsonl", "log", "html", "md"}


def doc_references(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for lineno, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                where = f"{doc.relative_to(REPO_ROOT)}:{lineno}"
                found.append((where, match.group(0).rstrip(".")))
    return found


@cache
def top_level_names(module_file: Path) -> frozenset[str]:
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def module_file(parts: list[str]) -> Path | None:
    base = REPO_ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_name_exists(name: str) -> bool:
    parts = name.split(".")
    if module_file(parts):
        return True
    owner = module_file(parts[:-1])
    return owner is not None and parts[-1] in top_level_names(owner)


def test_docs_name_files_that_exist() -> None:
    references = doc_references(PATH)
    assert references, "the pattern found no paths: the docs or the pattern changed"
    missing = [f"{where}: {path}" for where, path in references if not (REPO_ROOT / path).is_file()]
    assert not missing, "docs name files that do not exist:\n" + "\n".join(missing)


def test_docs_name_modules_that_exist() -> None:
    references = [
        (where, name)
        for where, name in doc_references(DOTTED)
        if name.rsplit(".", 1)[-1] not in FILE_SUFFIXES
    ]
    assert references, "the pattern found no dotted names: the docs or the pattern changed"
    missing = [f"{where}: {name}" for where, name in references if not dotted_name_exists(name)]
    assert not missing, "docs name modules or names that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("name", "exists"),
    [
        ("batch.plan.resume", True),
        ("batch.plan.resume.apply_resume", True),
        ("run_support.results.RUN_META", True),
        ("batch.plan.resume.no_such_function", False),
        ("batch.no_such_module.name", False),
        ("batch.plan.resume.apply_resume.attribute", False),
    ],
)
def test_dotted_name_check(name: str, exists: bool) -> None:
    assert dotted_name_exists(name) is exists
