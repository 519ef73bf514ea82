"""Every file of a batch dir is opened through ``run_support.safe_files`` (issue 40, item 7).

The code of ``batch/`` and ``run_support/`` is read as syntax trees and every way to open
a file by name is looked for: ``open(...)``, ``os.open``, ``Path.open``, ``read_text``,
``read_bytes``, ``write_text``, ``write_bytes``, ``gzip.open`` (and bz2, lzma, io).
``open()`` of a descriptor that ``safe_files`` opened is fine (its first argument is a call
of it, or a name ending in ``fd``); so is ``os.open`` that can neither follow a symlink
nor block on a FIFO (:data:`_SAFE_FLAGS`: ``O_NOFOLLOW`` alone does not keep a FIFO from
blocking). Anything else is
either in :data:`ALLOWED`, with the reason it does not open a file of a batch dir, or a
failure naming the place. ``read_bytes(..., limit=None)`` (an unbounded read) is refused
everywhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.paths import REPO_ROOT

#: (file, a piece of the call's source) → why it may open a file another way.
ALLOWED: dict[tuple[str, str], str] = {
    ("run_support/safe_files.py", ""): "the one place that opens them",
    ("batch/display/plain.py", "open(os.devnull"): "/dev/null, not a batch dir file",
    ("batch/processes/groups.py", "/proc/"): "procfs: a process's environment",
    ("batch/plan/lock.py", "os.open(batch_dir, os.O_RDONLY | os.O_DIRECTORY"): (
        "the batch dir itself (the path the user named), opened as a directory only to hold "
        "an flock on it: nothing is read or written through it"
    ),
    ("run_support/filesystems.py", "MOUNTINFO"): "procfs: /proc/self/mountinfo",
    ("batch/view/server.py", "STATIC"): "the view's own page, from the installed package",
    ("run_support/ledger_cache.py", "source.read_bytes"): (
        "run_support/run_meta.py's own source, for a fingerprint of the reading rules"
    ),
    ("batch/cli/group.py", "formatter.write_text"): "click's help formatter, not a file",
    ("batch/sweep/yaml_reader.py", "path.read_bytes"): "the sweep file the user names",
    ("batch/sweep/yaml_fast.py", "path.read_bytes"): "the sweep file the user names",
    ("batch/sweep/dataset.py", "os.open(path"): (
        "a dataset the sweep names, outside the batch dir; opened O_NONBLOCK and refused "
        "unless fstat says it is a regular file (batch/sweep/dataset.py)"
    ),
    ("batch/sweep/dataset.py", "open(fd"): "the dataset's descriptor opened just above",
    ("run_support/atomic.py", "os.open(tmp, flags"): (
        "the atomic writer: O_EXCL | O_NOFOLLOW on a fresh name in a dir fd from "
        "safe_files.parent_fd"
    ),
    ("run_support/atomic.py", "os.open(directory, os.O_RDONLY)"): (
        "a directory opened to fsync it, nothing read or written"
    ),
    ("run_support/ledger_fstat.py", "os.open(batch_dir / model_dir"): (
        "a model dir opened only to list and stat its records (never read through it); "
        "the records are read by ledger_scan through safe_files"
    ),
}

_OPENERS = {"open", "read_text", "read_bytes", "write_text", "write_bytes"}
#: Flags of an ``os.open`` that cannot follow a symlink nor block: any one of these sets.
_SAFE_FLAGS = (
    ("O_NOFOLLOW", "O_NONBLOCK"),
    ("O_NOFOLLOW", "O_DIRECTORY"),
    ("O_CREAT", "O_EXCL"),
    ("O_TMPFILE",),
)


def _source_files() -> list[Path]:
    return sorted(
        path for root in ("batch", "run_support") for path in (REPO_ROOT / root).rglob("*.py")
    )


def _opens(tree: ast.AST) -> list[ast.Call]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(node)
        elif isinstance(func, ast.Attribute) and func.attr in _OPENERS:
            base = func.value
            if isinstance(base, ast.Name) and base.id == "safe_files":
                continue
            found.append(node)
    return found


def _by_descriptor(call: ast.Call) -> bool:
    """``open(fd, ...)``: a descriptor opened already (by safe_files, the callers show)."""
    if not (isinstance(call.func, ast.Name) and call.args):
        return False
    first = call.args[0]
    if isinstance(first, ast.Name):
        return first.id == "fd" or first.id.endswith("_fd")
    if isinstance(first, ast.Call):
        called = first.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        return name in {"open_fd", "open_append_fd", "parent_fd", "open_dir"}
    return False


def _safe_os_open(call: ast.Call, text: str) -> bool:
    """``os.open`` with flags that can neither follow a symlink nor block."""
    func = call.func
    is_os_open = (
        isinstance(func, ast.Attribute)
        and func.attr == "open"
        and isinstance(func.value, ast.Name)
        and func.value.id == "os"
    )
    return is_os_open and any(all(flag in text for flag in flags) for flags in _SAFE_FLAGS)


def _allowed(relative: str, text: str) -> bool:
    # An empty piece allows the whole file.
    return any(relative == file and piece in text for (file, piece) in ALLOWED)


def test_no_file_of_a_batch_dir_is_opened_around_safe_files() -> None:
    bypasses = []
    for path in _source_files():
        relative = path.relative_to(REPO_ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        for call in _opens(ast.parse(source)):
            text = ast.get_source_segment(source, call) or ""
            if _by_descriptor(call) or _allowed(relative, text):
                continue
            if _safe_os_open(call, text):
                continue
            bypasses.append(f"{relative}:{call.lineno}: {text.splitlines()[0]}")
    assert bypasses == [], "open these through run_support.safe_files:\n" + "\n".join(bypasses)


def test_no_read_is_unbounded() -> None:
    unbounded = []
    for path in _source_files():
        relative = path.relative_to(REPO_ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and any(
                keyword.arg == "limit"
                and isinstance(keyword.value, ast.Constant)
                and keyword.value.value is None
                for keyword in node.keywords
            ):
                unbounded.append(f"{relative}:{node.lineno}")
    assert unbounded == []


def test_every_allowance_is_still_needed() -> None:
    # An allowance whose call is gone would let a new bypass in unseen: keep the list exact.
    sources = {
        path.relative_to(REPO_ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in _source_files()
    }
    stale = [
        f"{file}: {piece}"
        for (file, piece) in ALLOWED
        if file not in sources or (piece and piece not in sources[file])
    ]
    assert stale == []


def test_the_scan_finds_a_bypass() -> None:
    # The scan itself, on code that opens a batch dir file around safe_files.
    bad = "Path(d).read_text()\nopen(d / 'y')\nos.open(p, os.O_NOFOLLOW)\nopen(fd)\np.open()\n"
    found = [ast.get_source_segment(bad, call) for call in _opens(ast.parse(bad))]
    assert found == [
        "Path(d).read_text()", "open(d / 'y')", "os.open(p, os.O_NOFOLLOW)", "open(fd)", "p.open()"
    ]  # fmt: skip
