"""``batch-logs/events.jsonl``: one JSON line per driver event, for humans and post-mortems.

Not part of the resume logic (the ledger is); appended without fsync for that reason.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from run_support.results import utc_stamp
from run_support.safe_files import open_append


class EventLog:
    def __init__(self, path: Path, redact: Callable[[str], str] = lambda text: text) -> None:
        self.path = path
        self._redact = redact
        self._file = open_append(path)

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"t": utc_stamp(), "event": event, **fields}, ensure_ascii=False)
        # A full disk must not take the sweep down over a log meant for humans.
        with contextlib.suppress(OSError):
            self._file.write(self._redact(line) + "\n")

    def close(self) -> None:
        self._file.close()
