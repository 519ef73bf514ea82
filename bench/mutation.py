"""Mutation run over the pure decision modules: do their unit tests notice every change?

    .venv/bin/python bench/mutation.py [--module PATH ...] [--sample N --seed S]
                                       [--only TEXT] [--list] [--show KEY] [--verbose]

For each module (``MODULES``: the module and the unit test files that are its own), every
mutant is one small change to its syntax tree: a flipped comparison (``<`` to ``<=``, ``==``
to ``!=``, ``in`` to ``not in``), ``and``/``or`` swapped, a ``not`` dropped, a constant
changed (``True``/``False`` swapped, a number plus one, a string wrapped in ``XX``), an
arithmetic or set operator swapped, ``min``/``max`` and ``any``/``all`` swapped, or a
statement in a function deleted. Docstrings, annotations, ``assert``s, decorators,
``Literal[...]``/``cast(...)`` type arguments and ``__all__`` are left alone (none is a
decision), and so are module- and class-level statements other than their constants (deleting
one only breaks the import).

A mutant runs the module's own unit tests, one process at a time: a child forked from this
process (which has imported pytest and the third-party libraries once, and none of the
project) imports the mutated module in place of the file on disk and runs
``pytest -x -q -p no:cacheprovider`` over the test files. A failing run kills the mutant; so
does one that overruns its timeout (``--timeout-factor`` times the module's clean run, at least
``--min-timeout`` seconds), whose process group is killed. The unmutated module's tests run
first and must pass.

Equivalent mutants (no behaviour a user could see) are listed in
``bench/mutation-equivalent.txt``, one a line: the mutant's key as this script prints it,
then ``  -- `` and why. They are not run and count in no score; a listed key that matches no
mutant is reported as stale. Per module the script prints mutants tried, killed, survived,
equivalent and the score (killed / tried), then every survivor's key. Exit status 1 when a
module scores below ``--min-score`` (95 %), 2 when a module's clean test run fails.

``--sample N --seed S`` tries N mutants per module, drawn with seed S, for a quick look while
writing tests; without it every mutant is tried (the full run: about half an hour on a
quiet core). ``--list`` prints the keys without running anything, ``--show KEY`` the mutated
source line of one mutant.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.abc
import importlib.util
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import CodeType, ModuleType

import attrs

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "bench" / "mutation-equivalent.txt"

#: Each pure decision module and its own unit tests: the mutants of a module count as
#: killed only by these.
MODULES: dict[str, tuple[str, ...]] = {
    "batch/plan/resume.py": (
        "tests/unit/plan/test_resume.py",
        "tests/unit/plan/test_resume_steps.py",
        "tests/unit/plan/test_resume_properties.py",
    ),
    "batch/attempt/classify.py": ("tests/unit/attempt/test_classify.py",),
    "batch/attempt/worker_protocol.py": ("tests/unit/attempt/test_worker_protocol.py",),
    "run_support/results.py": ("tests/unit/run_support/test_results.py",),
    "batch/policies/aimd.py": ("tests/unit/policies/test_aimd.py",),
    "batch/policies/attempts.py": ("tests/unit/policies/test_attempts.py",),
    "batch/policies/breaker.py": ("tests/unit/policies/test_breaker.py",),
    "batch/policies/deadline.py": ("tests/unit/policies/test_deadline.py",),
    "batch/policies/halt.py": ("tests/unit/policies/test_halt.py",),
    "batch/policies/spend.py": ("tests/unit/policies/test_spend.py",),
    "batch/policies/stall.py": ("tests/unit/policies/test_stall.py",),
    "batch/stats/rates.py": ("tests/unit/stats/test_stats.py",),
    # The cells are seen through their renderings: the format tests are the cells' too.
    "batch/stats/cells.py": (
        "tests/unit/stats/test_stats_cells.py",
        "tests/unit/stats/test_stats_format.py",
        "tests/unit/stats/test_stats.py",
    ),
    "batch/stats/render.py": (
        "tests/unit/stats/test_stats_format.py",
        "tests/unit/stats/test_stats.py",
        "tests/unit/stats/test_stats_fit.py",
    ),
    "batch/stats/source.py": ("tests/unit/stats/test_stats_input.py",),
    "batch/stats/repeats.py": ("tests/unit/stats/test_repeats_stats.py",),
    "batch/stats/repeats_rows.py": ("tests/unit/stats/test_sample_stats.py",),
    "batch/stop_when/confidence_sequence.py": ("tests/unit/stop_when/test_confidence_sequence.py",),
    "batch/stop_when/rules.py": ("tests/unit/stop_when/test_rules.py",),
    "batch/stop_when/estimate.py": ("tests/unit/stop_when/test_rules.py",),
    "batch/stop_when/tracking.py": ("tests/unit/stop_when/test_tracking.py",),
}

#: Third-party modules imported once before forking, so that no mutant pays for them.
PRELOAD = (
    "pytest", "hypothesis", "attrs", "cattrs", "click", "rich", "ruamel.yaml", "psutil",
    # The repeats estimators' tests check against scipy (a development dependency).
    "scipy.stats",
)  # fmt: skip

_COMPARE_FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_OPERATOR_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}
_NAME_SWAPS = {"min": "max", "max": "min", "any": "all", "all": "any"}
_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.BitOr: "|", ast.BitAnd: "&",
    ast.And: "and", ast.Or: "or",
}  # fmt: skip
_DELETABLE = (
    ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Break,
    ast.Continue,
)  # fmt: skip


@attrs.define
class Mutant:
    """One change: ``key`` names it stably (no line number, so an edit above it keeps it)."""

    key: str
    line: int
    apply: Callable[[], None]
    undo: Callable[[], None]


def _short(source: str, node: ast.AST, limit: int = 60) -> str:
    text = " ".join((ast.get_source_segment(source, node) or ast.unparse(node)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _set(obj: object, field: str, value: object) -> Callable[[], None]:
    return lambda: setattr(obj, field, value)


def _constant_change(value: object) -> object | None:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return f"XX{value}XX"
    return None


class _Sites(ast.NodeVisitor):
    """Every mutant of one module's tree, in source order."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.mutants: list[Mutant] = []
        self.scope: list[str] = []
        self.in_function = 0
        self.keys: dict[str, int] = {}

    def add(
        self, node: ast.AST, what: str, apply: Callable[[], None], undo: Callable[[], None]
    ) -> None:
        base = f"{'.'.join(self.scope) or '<module>'}: {what}"
        seen = self.keys.get(base, 0)
        self.keys[base] = seen + 1
        key = base if seen == 0 else f"{base} #{seen + 1}"
        self.mutants.append(Mutant(key, getattr(node, "lineno", 0), apply, undo))

    def change(self, node: ast.AST, what: str, obj: object, field: str, new: object) -> None:
        """A mutant that sets ``obj.field`` to ``new`` (and back)."""
        self.add(node, what, _set(obj, field, new), _set(obj, field, getattr(obj, field)))

    # --- what is left alone ----------------------------------------------------------------

    def _body(self, body: list[ast.stmt]) -> None:
        start = 1 if body and _is_docstring(body[0]) else 0
        for index, stmt in enumerate(body[start:], start):
            if self.in_function and isinstance(stmt, _DELETABLE):
                self._deletion(body, index, stmt)
            self.visit(stmt)

    def _deletion(self, body: list[ast.stmt], index: int, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
            return
        replacement = ast.copy_location(ast.Pass(), stmt)
        self.add(
            stmt,
            f"delete `{_short(self.source, stmt)}`",
            lambda: body.__setitem__(index, replacement),
            lambda: body.__setitem__(index, stmt),
        )

    def visit_Module(self, node: ast.Module) -> None:
        for stmt in node.body[1 if node.body and _is_docstring(node.body[0]) else 0 :]:
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
            ):
                continue
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                continue
            self.visit(stmt)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Defaults are decisions; annotations and decorators are not.
        self.scope.append(node.name)
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(default)
        self.in_function += 1
        self._body(node.body)
        self.in_function -= 1
        self.scope.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        outer, self.in_function = self.in_function, 0
        self._body(node.body)
        self.in_function = outer
        self.scope.pop()

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_Assert(self, node: ast.Assert) -> None:
        return

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.value, ast.Name) and node.value.id == "Literal":
            return
        self.generic_visit(node)

    def _bodies(self, node: ast.AST) -> None:
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "finalbody") and isinstance(value, list):
                self._body(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    visit_If = _bodies
    visit_For = _bodies
    visit_While = _bodies
    visit_With = _bodies
    visit_Try = _bodies
    visit_ExceptHandler = _bodies
    visit_match_case = _bodies

    # --- the mutants -----------------------------------------------------------------------

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            flip = _COMPARE_FLIPS.get(type(op))
            if flip is None:
                continue
            ops = node.ops
            flipped = [*ops[:i], flip(), *ops[i + 1 :]]
            self.change(
                node,
                f"`{_short(self.source, node)}` {_SYMBOLS[type(op)]} -> {_SYMBOLS[flip]}",
                node,
                "ops",
                flipped,
            )
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self.change(
            node,
            f"`{_short(self.source, node)}` {_SYMBOLS[type(node.op)]} -> {_SYMBOLS[type(other)]}",
            node,
            "op",
            other,
        )
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            # `not x` becomes `not (not x)`, the truth of `x`: the `not` dropped, whatever `x` is.
            operand = node.operand
            doubled = ast.copy_location(ast.UnaryOp(ast.Not(), operand), operand)
            self.change(
                node,
                f"`{_short(self.source, node)}` drop not",
                node,
                "operand",
                doubled,
            )
        self.generic_visit(node)

    def _operator(self, node: ast.BinOp | ast.AugAssign, suffix: str) -> None:
        swap = _OPERATOR_SWAPS.get(type(node.op))
        if swap is not None:
            self.change(
                node,
                f"`{_short(self.source, node)}` {_SYMBOLS[type(node.op)]}{suffix} -> "
                f"{_SYMBOLS[swap]}{suffix}",
                node,
                "op",
                swap(),
            )
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self._operator(node, "")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._operator(node, "=")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _NAME_SWAPS:
            self.change(
                node,
                f"`{_short(self.source, node)}` {func.id} -> {_NAME_SWAPS[func.id]}",
                func,
                "id",
                _NAME_SWAPS[func.id],
            )
        if isinstance(func, ast.Name) and func.id == "cast":
            for arg in node.args[1:]:
                self.visit(arg)
            return
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        new = _constant_change(node.value)
        if new is None:
            return
        self.change(
            node,
            f"constant {_short(self.source, node, 40)} -> {new!r:.40}",
            node,
            "value",
            new,
        )

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        for value in node.values:
            if isinstance(value, ast.Constant):
                self.change(
                    value,
                    f"f-string part {value.value!r:.40} -> XX",
                    value,
                    "value",
                    f"XX{value.value!s}XX",
                )
            else:
                self.visit(value)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> None:
        self.visit(node.value)  # a format spec is a rendering detail stats tests read as text
        if node.format_spec is not None:
            self.visit(node.format_spec)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def mutants_of(path: Path) -> tuple[ast.Module, list[Mutant]]:
    source = path.read_text()
    tree = ast.parse(source, str(path))
    sites = _Sites(source)
    sites.visit(tree)
    return tree, sites.mutants


def compile_mutant(tree: ast.Module, mutant: Mutant | None, path: Path) -> CodeType | None:
    if mutant is None:
        return compile(tree, str(path), "exec")
    mutant.apply()
    try:
        fixed = ast.fix_missing_locations(copy.deepcopy(tree))
        return compile(fixed, str(path), "exec")
    except (SyntaxError, ValueError, TypeError):
        return None
    finally:
        mutant.undo()


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one module from a compiled code object instead of its file."""

    def __init__(self, name: str, path: Path, code: CodeType) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)


def run_tests(name: str, path: Path, code: CodeType, tests: Sequence[str], timeout: float) -> str:
    """``killed``, ``survived`` or ``timeout``: the tests over the module as ``code``."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            sys.meta_path.insert(0, _MutantFinder(name, path, code))
            import pytest

            # In this process, where the mutant is: pyproject's addopts would hand the tests
            # to xdist workers, which import the module as it is on disk.
            status = pytest.main(["-x", "-q", "-n0", "-p", "no:cacheprovider", *tests])
            os._exit(int(status))
        except BaseException:
            os._exit(99)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)
    return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"


def read_equivalent(file: Path) -> dict[tuple[str, str], str]:
    """``{(module, key): why}`` from the kept list (``module key  -- why`` a line)."""
    listed: dict[tuple[str, str], str] = {}
    if not file.exists():
        return listed
    for number, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        entry, sep, why = line.partition("  -- ")
        module, _, key = entry.partition(" ")
        if not sep or not key or not why.strip():
            raise SystemExit(f"{file}:{number}: expected `MODULE KEY  -- WHY`")
        listed[(module, key.strip())] = why.strip()
    return listed


@attrs.define
class Tally:
    module: str
    tried: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[str] = attrs.Factory(list)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.tried if self.tried else 100.0


def run_module(
    module: str, args: argparse.Namespace, equivalent: dict[tuple[str, str], str]
) -> Tally | None:
    path = ROOT / module
    tests = [t for t in MODULES[module] if (ROOT / t).exists()]
    tree, mutants = mutants_of(path)
    tally = Tally(module)
    listed = {key for (mod, key) in equivalent if mod == module}
    keys = {m.key for m in mutants}
    for stale in sorted(listed - keys):
        print(f"  stale equivalent entry (matches no mutant): {module} {stale}")
    tally.equivalent = len(listed & keys)
    candidates = [m for m in mutants if m.key not in listed]
    if args.only:
        candidates = [m for m in candidates if args.only in m.key]
    if args.sample is not None and args.sample < len(candidates):
        candidates = sorted(
            random.Random(f"{args.seed}:{module}").sample(candidates, args.sample),
            key=mutants.index,
        )
    name = module_name(module)
    clean = compile_mutant(tree, None, path)
    assert clean is not None
    start = time.monotonic()
    if run_tests(name, path, clean, tests, 600) != "survived":
        print(f"{module}: its tests fail without a mutant: {' '.join(tests)}", file=sys.stderr)
        return None
    timeout = max(args.min_timeout, args.timeout_factor * (time.monotonic() - start))
    for mutant in candidates:
        code = compile_mutant(tree, mutant, path)
        if code is None:
            continue  # not valid Python: no mutant at all
        result = run_tests(name, path, code, tests, timeout)
        tally.tried += 1
        if result == "survived":
            tally.survivors.append(mutant.key)
        else:
            tally.killed += 1
        if args.verbose:
            print(f"  {result:8} {module}:{mutant.line} {mutant.key}", flush=True)
    return tally


def print_table(tallies: Sequence[Tally]) -> None:
    width = max(len("module"), *(len(t.module) for t in tallies))
    print(f"{'module':<{width}}  tried  killed  survived  equivalent  score")
    for t in tallies:
        print(
            f"{t.module:<{width}}  {t.tried:5}  {t.killed:6}  {len(t.survivors):8}  "
            f"{t.equivalent:10}  {t.score:5.1f}%"
        )
    tried = sum(t.tried for t in tallies)
    killed = sum(t.killed for t in tallies)
    total = 100.0 * killed / tried if tried else 100.0
    print(
        f"{'total':<{width}}  {tried:5}  {killed:6}  {tried - killed:8}  "
        f"{sum(t.equivalent for t in tallies):10}  {total:5.1f}%"
    )


def _chosen(args: argparse.Namespace) -> list[str]:
    if not args.module:
        return list(MODULES)
    unknown = [m for m in args.module if m not in MODULES]
    if unknown:
        raise SystemExit(f"unknown module {unknown[0]!r}; one of: {', '.join(MODULES)}")
    return list(args.module)


def _show(modules: Sequence[str], key: str) -> int:
    for module in modules:
        tree, mutants = mutants_of(ROOT / module)
        for mutant in mutants:
            if mutant.key == key:
                mutant.apply()
                ast.fix_missing_locations(tree)
                lines = ast.unparse(tree)
                mutant.undo()
                print(f"{module}:{mutant.line}: {key}")
                original = ast.unparse(mutants_of(ROOT / module)[0]).splitlines()
                for old, new in zip(original, lines.splitlines(), strict=False):
                    if old != new:
                        print(f"- {old}\n+ {new}")
                        break
                return 0
    print(f"no mutant {key!r}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", help="a path from MODULES (repeatable)")
    parser.add_argument("--sample", type=int, help="mutants tried per module (default: all)")
    parser.add_argument("--seed", default="0", help="the sample's seed")
    parser.add_argument("--only", help="only mutants whose key contains this text")
    parser.add_argument("--list", action="store_true", help="print the mutants' keys, run none")
    parser.add_argument("--show", metavar="KEY", help="print one mutant's changed line")
    parser.add_argument("--timeout-factor", type=float, default=5.0)
    parser.add_argument("--min-timeout", type=float, default=20.0)
    parser.add_argument("--min-score", type=float, default=95.0)
    parser.add_argument("--equivalent", type=Path, default=EQUIVALENT_FILE)
    parser.add_argument("--verbose", "-v", action="store_true", help="a line per mutant")
    args = parser.parse_args(argv)
    modules = _chosen(args)
    if args.show:
        return _show(modules, args.show)
    if args.list:
        for module in modules:
            for mutant in mutants_of(ROOT / module)[1]:
                print(f"{module}:{mutant.line}  {module} {mutant.key}")
        return 0
    equivalent = read_equivalent(args.equivalent)
    os.chdir(ROOT)
    for name in PRELOAD:
        __import__(name)
    tallies: list[Tally] = []
    for module in modules:
        tally = run_module(module, args, equivalent)
        if tally is None:
            return 2
        tallies.append(tally)
        print(f"{module}: {tally.killed}/{tally.tried} killed ({tally.score:.1f}%)", flush=True)
    print()
    print_table(tallies)
    for tally in tallies:
        if tally.survivors:
            print(f"\nsurvivors in {tally.module}:")
            for key in tally.survivors:
                print(f"  {tally.module} {key}")
    return 0 if all(t.score >= args.min_score for t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
