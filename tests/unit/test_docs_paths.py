"""Every module and page the docs name exists: a moved or renamed module, or a renamed
heading, fails here, not in a reader's hands.

Checks README.md and docs/*.md for paths (``batch/plan/resume.py``, ``tests/e2e/``,
``tests/data/bad_sweeps/secret_*.yaml``, ``bench/overhead.py``: a glob must match), dotted
names (``batch.plan.resume.apply_resume``, ``run_support.results``) and relative links
(``[x](ledger.md#failure-categories)``). A dotted name is either a module or package, or a
module followed by one name defined or imported at its top level (a function, class,
assignment or ``from ... import``). A
link's file must exist and its anchor must be one of that page's headings. Static: nothing
is imported.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from helpers.paths import REPO_ROOT

DOCS = [
    REPO_ROOT / "README.md",
    REPO_ROOT / "CONTRIBUTING.md",
    *sorted((REPO_ROOT / "docs").glob("*.md")),
]

#: A file, a directory (``tests/e2e/``) or a glob (``tests/data/bad_sweeps/secret_*.yaml``).
PATH = re.compile(
    r"(?<![\w./-])(?:batch|run_support|tests|bench|examples|scripts|docs)/[\w./*<>-]*[\w*/]"
)
DOTTED = re.compile(r"(?<![\w./-])(?:batch|run_support)(?:\.\w+)+")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$")
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
            for target in node.targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                names.update(e.id for e in elements if isinstance(e, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            # Importable from here too (run_support.results.RUN_META).
            names.update(alias.asname or alias.name for alias in node.names)
    return frozenset(names)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    found = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        in_code ^= line.startswith("```")
        heading = HEADING.match(line)
        if heading and not in_code:
            found.add(anchor(heading.group(1)))
    return frozenset(found)


def link_problem(doc: Path, target: str) -> str | None:
    if re.match(r"[a-z]+:", target):  # https:, mailto:
        return None
    path_part, _, fragment = target.partition("#")
    page = (doc.parent / path_part).resolve() if path_part else doc
    if not page.exists():
        return f"no file {path_part}"
    if fragment and page.suffix == ".md" and fragment not in anchors(page):
        return f"no heading #{fragment} in {page.name}"
    return None


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


def path_exists(path: str) -> bool:
    if "<" in path:  # a pattern such as tests/unit/<package>/
        return True
    if "*" in path:
        return any(REPO_ROOT.glob(path))
    return (REPO_ROOT / path).exists()


def test_docs_name_files_that_exist() -> None:
    references = doc_references(PATH)
    assert references, "the pattern found no paths: the docs or the pattern changed"
    missing = [f"{where}: {path}" for where, path in references if not path_exists(path)]
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


def test_docs_links_lead_to_existing_pages_and_headings() -> None:
    problems = []
    for doc in DOCS:
        for lineno, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for match in LINK.finditer(line):
                problem = link_problem(doc, match.group(1))
                if problem:
                    problems.append(f"{doc.relative_to(REPO_ROOT)}:{lineno}: {problem}")
    assert not problems, "broken links in the docs:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("2. No orphans", "2-no-orphans"),
        ("`--format json` (schema 1)", "--format-json-schema-1"),
        ("The ledger index (`.ledger-index`)", "the-ledger-index-ledger-index"),
        ("`between_models`", "between_models"),
    ],
)
def test_anchor_is_githubs(heading: str, expected: str) -> None:
    assert anchor(heading) == expected


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


def test_top_level_names_are_functions_classes_and_assignments(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "A, B = 1, 2\nC = D = 3\nE: int = 4\ndef f(): pass\nasync def g(): pass\n"
        "class K:\n    inner = 5\nif True:\n    hidden = 6\nfrom os import sep, path as p\n"
    )
    assert top_level_names(module) == {"A", "B", "C", "D", "E", "f", "g", "K", "sep", "p"}


def test_the_readme_lists_every_page_of_docs() -> None:
    # docs/notify.md and docs/usage.md were once missing from it.
    listed = set(
        re.findall(r"^- `(docs/[\w-]+\.md)` — ", (REPO_ROOT / "README.md").read_text(), re.M)
    )
    pages = {f"docs/{page.name}" for page in (REPO_ROOT / "docs").glob("*.md")}
    assert pages - listed == set()


def test_the_design_docs_tree_of_a_batch_dir_names_every_file_a_batch_dir_holds() -> None:
    """Every name batch/layout.py (and the ledger and the control files) gives a file or
    dir of a batch dir is in docs/design.md's drawing of one."""
    from batch import layout, steering

    text = (REPO_ROOT / "docs" / "design.md").read_text()
    start = text.index("## The batch dir and its file formats")
    tree = text[start : text.index("\n```\n", text.index("```", start) + 3)]
    held = [
        layout.SNAPSHOT,
        layout.SUMMARY_NAME,
        layout.REPORT,
        layout.EVENTS,
        layout.LOCK,
        layout.PGIDS,
        layout.BETWEEN_MODELS_LOG,
        layout.NOTIFY_LOG,
        layout.WORKERS_LOG,
        layout.DASK_CLAIMS,
        layout.OUTPUT_LOG,
        layout.CASE_JSON,
        layout.RESULT_JSON,
        layout.RUN_META,
        layout.LOGS_DIR,
        layout.CHECKS_DIR,
        steering.CONTROL_DIR,
    ]
    missing = [name for name in held if re.search(rf"[\s/]{re.escape(name)}\b", tree) is None]
    assert not missing, f"docs/design.md's batch dir tree leaves out {missing}"


def test_design_names_the_modules_of_categories_and_of_stats_tables() -> None:
    """docs/design.md's table of rules names the module that decides a failure category and
    every module that makes or renders a ``batch stats`` table; CONTRIBUTING.md says where
    each kind of change goes."""
    rows = (REPO_ROOT / "docs" / "design.md").read_text().splitlines()
    (categories,) = [row for row in rows if row.startswith("| a record's status and failure")]
    assert "batch/attempt/classify.py" in categories
    (stats,) = [row for row in rows if row.startswith("| pass rates, intervals")]
    renderers = {
        f"batch/stats/{path.name}"
        for path in (REPO_ROOT / "batch" / "stats").glob("*.py")
        if "Section(" in path.read_text()
    }
    assert renderers and all(module in stats for module in renderers), renderers
    guide = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    for needed in ("-n0", "ruff format --check", "lint-imports", "bench/mutation.py", "apt-get"):
        assert needed in guide, needed
