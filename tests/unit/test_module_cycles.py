"""No module of ``batch`` or ``run_support`` imports a module that imports it back, counting
imports inside functions and under ``TYPE_CHECKING`` (a lazy or a type-only import still
ties the two together). Static: nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.paths import REPO_ROOT

PACKAGES = ("batch", "run_support")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports anywhere in it (``from a.b import c`` is a.b.c
    when that is a module, else a.b)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else node.module)
    return {name for name in found if name in known}


def test_no_module_imports_one_that_imports_it_back() -> None:
    known = modules()
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    pairs = sorted(
        {tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]}
    )
    assert pairs == [], f"modules that import each other: {pairs}"
