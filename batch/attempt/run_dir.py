"""An attempt's run dir: made exclusively (``-2``, ``-3``… beside one that exists) with its
``case.json`` and an empty ``output.log``; and, when a write in it fails, what the job did to
it (removed it, replaced it, made it read-only), which makes the failure the job's ``error``
rather than the batch dir's (``batch.attempt.runner``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from batch.layout import CASE_JSON, OUTPUT_LOG
from run_support.results import RUN_META
from run_support.safe_files import open_append_fd, open_fd


def make_run_dir(model_dir: Path, name: str, *, make_model_dir: bool = True) -> Path:
    """Create ``model_dir/name`` exclusively (``-2``, ``-3``… when it exists); one mkdir.
    A missing ``model_dir`` is made too, unless ``make_model_dir`` is False."""
    n = 1
    while True:
        path = model_dir / (name if n == 1 else f"{name}-{n}")
        try:
            os.mkdir(path)
        except FileExistsError:
            n += 1
            continue
        except FileNotFoundError:
            if not make_model_dir:
                raise
            # The model's first run: its directory is made once, not checked for every job.
            os.makedirs(model_dir, exist_ok=True)
            continue
        return path


def prepare_run_dir(model_dir: Path, name: str, case_row: bytes | None) -> Path:
    """Make the attempt's run dir (:func:`make_run_dir`) with its ``case.json`` (a dataset
    row) and an empty ``output.log``, which the job's spawn then opens. A log that cannot
    be made here is left to the spawn, whose error says what it met."""
    run_dir = make_run_dir(model_dir, name)
    if case_row is not None:
        _write_case_file(run_dir, case_row)
    with contextlib.suppress(OSError):
        os.close(open_append_fd(run_dir / OUTPUT_LOG))
    return run_dir


def remove_unstarted(run_dir: Path) -> None:
    """Remove the run dir of an attempt that never started (the driver's limits refused its
    spawn): what :func:`prepare_run_dir` put in it, by path. No descriptor is needed for
    it, so it works when the driver has none left, which is when a start is refused
    (``shutil.rmtree`` opens the directory first, and left it behind then). Anything else
    found in it is left, with the directory."""
    for name in (OUTPUT_LOG, CASE_JSON):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(run_dir / name)
    with contextlib.suppress(OSError):
        os.rmdir(run_dir)


def _write_case_file(run_dir: Path, row: bytes) -> None:
    """The dataset row the job reads, in its fresh run dir (no fsync: a lost run dir is a
    run without a record, made again by a resume)."""
    fd = open_fd(run_dir / CASE_JSON, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        rest = memoryview(row + b"\n")
        while rest:
            rest = rest[os.write(fd, rest) :]
    finally:
        os.close(fd)


def run_dir_damage(run_dir: Path) -> str | None:
    """What was done to ``run_dir`` that explains a write failing in it, or None when it is
    as the driver made it (then the failure is the batch dir's: full, read-only)."""
    try:
        st = os.lstat(run_dir)
    except FileNotFoundError:
        return "the job's run dir was removed"
    except OSError:  # its model dir is not a directory either: not this job's alone
        return None
    if stat.S_ISLNK(st.st_mode):
        return "the job's run dir was replaced by a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "the job's run dir was replaced by a file"
    # access() sees what a write would meet: mode bits, immutable flag, a read-only mount
    # (which the write into a fresh run dir then also meets, and so still stops the sweep).
    if not os.access(run_dir, os.W_OK | os.X_OK):
        return f"the job's run dir was made read-only (mode {stat.S_IMODE(st.st_mode):o})"
    try:
        record = os.lstat(run_dir / RUN_META)
    except OSError:
        return None
    if not stat.S_ISREG(record.st_mode):
        return f"something that is not a file was put at the job's {RUN_META}"
    return None
