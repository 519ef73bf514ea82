"""Following a batch dir for ``batch view``: ``events.jsonl`` from where it was last read,
the summary again only when a new invocation has rewritten it.

Reads the batch dir only, and never a record: it works for a finished batch, for one a
driver is running under any executor, and whatever happens to the view, the sweep is not
touched. The events are read across their rotations (``batch.event_segments``), from the
oldest segment on. An events line is at most :data:`MAX_LINE` bytes (a longer one is skipped whole),
and one poll reads at most :data:`MAX_READ`, so a huge file is taken in steps. The summary
is read as every reader reads it: never through a symlink or from a FIFO, and never past
``MAX_SUMMARY_BYTES``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batch.event_segments import MAX_LINE, Lines, SegmentReader
from batch.layout import LOGS_DIR, SUMMARY_NAME
from batch.summary.read import MAX_SUMMARY_BYTES
from batch.view.state import BatchView
from run_support.safe_files import read_bytes

__all__ = ["MAX_LINE", "MAX_READ", "BatchFollower"]

#: Bytes of events read at a time.
MAX_READ = 1 << 20


class BatchFollower:
    """One batch dir and its :class:`BatchView`, kept current by :meth:`poll`."""

    def __init__(
        self,
        batch_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
        read_summary: Callable[[Path, Callable[[dict[str, Any]], None]], Any] | None = None,
    ) -> None:
        self.batch_dir = Path(batch_dir)
        self.view = BatchView(self.batch_dir.name)
        self._clock = clock
        self._read_summary = read_summary or _read_summary
        self._events = SegmentReader(self.batch_dir / LOGS_DIR)
        self._lines = Lines(MAX_LINE)
        self._summary_mtime: int | None = None
        #: Set by a ``batch_start`` seen: the summary is read again once it has changed.
        self._summary_due = True

    def poll(self) -> bool:
        """Take what changed since the last poll; whether anything did."""
        changed = self._maybe_summary()
        if self._take_events():
            changed = True
            if self._summary_due:  # a new invocation started: its summary, once written
                self._maybe_summary()
        return changed

    def _apply(self, event: dict[str, Any]) -> None:
        if event.get("event") == "batch_start":
            self._summary_due = True
        self.view.apply(event, self._clock())

    def _maybe_summary(self) -> bool:
        if not self._summary_due:
            return False
        path = self.batch_dir / SUMMARY_NAME
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return False
        if mtime == self._summary_mtime:
            return False
        view = self.view
        view.begin_summary()
        summary = self._read_summary(path, view.add_row)
        if not isinstance(summary, dict):
            return False
        self._summary_mtime = mtime
        self._summary_due = False
        view.end_summary(summary)
        # Every event again over it, in order: each job ends in its newest state, and the
        # events say what the summary does not (when jobs started, the breakers, controls).
        self._events.close()
        self._events, self._lines = SegmentReader(self.batch_dir / LOGS_DIR), Lines(MAX_LINE)
        while self._take_events():
            pass
        self._summary_due = False  # the batch_start events just read again are in it
        return True

    def _take_events(self) -> bool:
        """Apply the complete lines appended since the last read, at most
        :data:`MAX_READ` bytes of them, a line at a time; whether there were any."""
        segment = self._events.segment
        data = self._events.read(MAX_READ)
        if self._events.segment != segment:  # a rotated segment's torn last line stays torn
            self._lines.reset()
        if not data:
            return False
        for line in self._lines.feed(data):
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                event = None
            if isinstance(event, dict):
                self._apply(event)
        return True


def _read_summary(path: Path, add_row: Callable[[dict[str, Any]], None]) -> Any:
    """The summary's top-level keys, each job row handed to ``add_row`` as it is parsed and
    then dropped: 100,000 rows as dicts would cost the view 100 MB it keeps (the heap
    does not give it back), a row at a time costs one row. None when it is unreadable."""

    def hook(item: dict[str, Any]) -> Any:
        if "case" in item and "model" in item and "status" in item:
            add_row(item)
            return None
        return item

    try:
        return json.loads(read_bytes(path, MAX_SUMMARY_BYTES), object_hook=hook)
    except (OSError, ValueError, RecursionError):
        return None
