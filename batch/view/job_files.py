"""A job's files for its page in ``batch view``: its record and the tail of its log.

The run dir comes from the batch (the summary or an event), so it is not trusted: it is
resolved, symlinks and ``..`` included, and must lie inside the batch dir; each file is
opened without following a symlink, read to a bound, and every text redacted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from batch.layout import OUTPUT_LOG
from batch.sweep.secrets import redact_value, redactor
from run_support.names import RUN_META
from run_support.safe_files import open_reader

#: The end of ``output.log`` shown, in bytes.
LOG_TAIL = 64 * 1024
#: A record larger than this is not shown.
MAX_RECORD = 1 << 20


def job_files(batch_dir: Path, run_dir: str | None, secrets: frozenset[str]) -> dict[str, Any]:
    """``{"record", "log", "log_truncated", "log_size"}`` of the run dir, or what is
    missing said in ``"problem"``."""
    if not run_dir:
        return {"record": None, "log": None, "problem": "not started yet"}
    root = os.path.realpath(batch_dir)
    where = os.path.realpath(os.path.join(root, run_dir))
    if os.path.commonpath([root, where]) != root or where == root:
        return {"record": None, "log": None, "problem": "its run dir is outside the batch dir"}
    redact = redactor(secrets)
    found: dict[str, Any] = {"record": None, "log": None}
    data = _read(os.path.join(where, RUN_META), MAX_RECORD + 1, tail=False)
    if data is not None and len(data) <= MAX_RECORD:
        try:
            found["record"] = redact_value(json.loads(data), secrets)
        except (ValueError, RecursionError):
            found["record"] = {"unreadable": "not JSON"}
    # With the margin before the tail (a secret the tail's start cuts is hidden whole) and
    # one byte more, which tells whether the tail is all of the log.
    log = _read(os.path.join(where, OUTPUT_LOG), LOG_TAIL + redact.margin + 1, tail=True)
    if log is not None:
        found["log"] = redact.tail(log, max(0, len(log) - LOG_TAIL))
        found["log_truncated"] = len(log) > LOG_TAIL
    return found


def _read(path: str, limit: int, *, tail: bool) -> bytes | None:
    """Up to ``limit`` bytes of a regular file (its last ones with ``tail``), never through
    a symlink; None when there is no such file."""
    try:
        handle = open_reader(path)
    except OSError:  # none there, or a symlink, a FIFO, a device: not read
        return None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if tail and size > limit:
            handle.seek(size - limit)
        return handle.read(limit)
