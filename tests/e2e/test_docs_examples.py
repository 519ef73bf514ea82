"""The command examples in ``docs/`` are run, so a doc that drifts from behaviour fails.

The convention (documented in ``docs/reliability.md``, *Examples that are run*):

- A fenced block whose info string is ``console`` is a transcript. Each line starting with
  ``$ `` is a command, run by ``bash`` in a temp dir (one per doc file, shared by its blocks
  in order) with this checkout's ``batch`` and ``python`` first on ``PATH``. The lines after
  it, up to the next command, are its stdout and stderr together. In an expected line,
  ``...`` stands for any text; a line that is only ``...`` stands for any number of lines.
  A command shows its exit status by ending in ``; echo "exit $?"``.
- ``<!-- doccheck file: NAME -->`` right before a fenced block writes that block to NAME
  in the temp dir first. ``<!-- doccheck file: NAME`` on a line of its own, then the text,
  then ``-->``, writes a file the reader does not need to see.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import pytest
from helpers.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"
_FENCE = re.compile(r"^```(\S*)\s*$")
_FILE_MARK = re.compile(r"^<!-- doccheck file: (\S+)\s*(-->)?\s*$")
PROMPT = "$ "
ANY_LINES = "..."


@attrs.frozen
class Command:
    line: int  # 1-based, in the doc
    text: str
    expected: tuple[str, ...]


@attrs.frozen
class DocFile:
    name: str
    text: str


def parse(markdown: str) -> Iterator[Command | DocFile]:
    """The files and commands of one doc, in the order they appear."""
    lines = markdown.splitlines()
    i, pending_file = 0, None
    while i < len(lines):
        line = lines[i]
        mark = _FILE_MARK.match(line)
        fence = _FENCE.match(line)
        if mark and mark.group(2):
            pending_file = mark.group(1)
        elif mark:
            end = lines.index("-->", i + 1)
            yield DocFile(mark.group(1), "\n".join(lines[i + 1 : end]) + "\n")
            i = end
        elif fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            body = lines[i + 1 : end]
            if pending_file is not None:
                yield DocFile(pending_file, "\n".join(body) + "\n")
            elif fence.group(1) == "console":
                yield from _commands(body, first_line=i + 2)
            pending_file = None
            i = end
        i += 1


def _commands(body: Sequence[str], first_line: int) -> Iterator[Command]:
    starts = [n for n, line in enumerate(body) if line.startswith(PROMPT)]
    assert starts and starts[0] == 0, f"line {first_line}: a console block starts with '$ '"
    for start, end in zip(starts, [*starts[1:], len(body)], strict=True):
        command = body[start].removeprefix(PROMPT)
        yield Command(first_line + start, command, tuple(body[start + 1 : end]))


def matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether ``actual`` lines fit the ``expected`` ones (``...`` wildcards, see above)."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == ANY_LINES:
        return any(matches(rest, actual[n:]) for n in range(len(actual) + 1))
    pattern = ".*".join(re.escape(part) for part in head.split(ANY_LINES))
    return (
        bool(actual) and re.fullmatch(pattern, actual[0]) is not None and matches(rest, actual[1:])
    )


def run_doc(doc: Path, workdir: Path) -> list[str]:
    """Run every example of ``doc`` in ``workdir``; one message per example that drifted."""
    env = dict(os.environ)
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="100",
        NO_COLOR="1",
    )
    problems = []
    for item in parse(doc.read_text(encoding="utf-8")):
        if isinstance(item, DocFile):
            path = workdir / item.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(item.text, encoding="utf-8")
            continue
        done = subprocess.run(
            ["bash", "-c", item.text],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
        )
        actual = [line.rstrip() for line in done.stdout.splitlines()]
        if not matches([line.rstrip() for line in item.expected], actual):
            problems.append(
                f"{doc.name}:{item.line}: $ {item.text}\n"
                + "".join(f"  expected: {line}\n" for line in item.expected)
                + "".join(f"  got:      {line}\n" for line in actual)
            )
    return problems


def docs_with_examples() -> list[Path]:
    return sorted(
        path
        for path in DOCS.glob("*.md")
        if any(isinstance(item, Command) for item in parse(path.read_text(encoding="utf-8")))
    )


@pytest.mark.parametrize("doc", docs_with_examples(), ids=lambda path: path.name)
def test_the_docs_examples_show_what_the_commands_do(doc: Path, tmp_path: Path) -> None:
    # One doc a test, so that `pytest -n` spreads the docs over its workers (a fixture
    # running every doc would run all of them again on each worker that gets one).
    drift = run_doc(doc, tmp_path)
    assert not drift, "\n".join(drift)


def test_the_docs_that_promise_errors_and_records_have_examples_that_run() -> None:
    assert {path.name for path in docs_with_examples()} >= {
        "cli.md",
        "ledger.md",
        "stats.md",
        "sweep-file.md",
    }


def test_a_drifted_example_is_reported_with_its_line(tmp_path: Path) -> None:
    doc = tmp_path / "drift.md"
    doc.write_text(
        "Text.\n\n<!-- doccheck file: note.txt\nhello\n-->\n\n"
        '```console\n$ cat note.txt; echo "exit $?"\nhello\nexit 0\n'
        '$ cat missing.txt 2>/dev/null; echo "exit $?"\nexit 0\n```\n'
    )
    (problem,) = run_doc(doc, tmp_path)
    assert problem.startswith("drift.md:11: $ cat missing.txt")
    assert "got:      exit 1" in problem


@pytest.mark.parametrize(
    ("expected", "actual", "fits"),
    [
        (["error: x"], ["error: x"], True),
        (["error: x"], ["error: x", "more"], False),
        (["error: ...: not a directory"], ["error: /tmp/a/b: not a directory"], True),
        (["error: ...: not a directory"], ["error: /tmp/a/b: no such file"], False),
        (["...", "exit 2"], ["a", "b", "exit 2"], True),
        (["...", "exit 2"], ["exit 1"], False),
        (["a", "...", "c"], ["a", "c"], True),
        (["a.b"], ["axb"], False),  # only ... is a wildcard
    ],
)
def test_expected_lines_match_with_wildcards(
    expected: list[str], actual: list[str], fits: bool
) -> None:
    assert matches(expected, actual) is fits
