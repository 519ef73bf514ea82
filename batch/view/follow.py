"""Following a batch dir for ``batch view``: ``events.jsonl`` from where it was last read,
the summary again only when a new invocation has rewritten it.

Reads the batch dir only, and never a record: it works for a finished batch, for one a
driver is running under any executor, and whatever happens to the view, the sweep is not
touched. An events line is at most :data:`MAX_LINE` bytes (a longer one is skipped whole),
and one poll reads at most :data:`MAX_READ`, so a huge file is taken in steps.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batch.layout import EVENTS, LOGS_DIR, SUMMARY_NAME
from batch.view.state import BatchView

#: The longest events line taken (the driver's are far shorter).
MAX_LINE = 1 << 20
#: Bytes of events read per poll at most.
MAX_READ = 8 << 20


class BatchFollower:
    """One batch dir and its :class:`BatchView`, kept current by :meth:`poll`."""

    def __init__(
        self,
        batch_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
        read_summary: Callable[[Path], Any] | None = None,
    ) -> None:
        self.batch_dir = Path(batch_dir)
        self.view = BatchView(self.batch_dir.name)
        self._clock = clock
        self._read_summary = read_summary or _read_summary
        self._events = self.batch_dir / LOGS_DIR / EVENTS
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""
        self._summary_mtime: int | None = None
        #: Set by a ``batch_start`` seen: the summary is read again once it has changed.
        self._summary_due = True

    def poll(self) -> bool:
        """Take what changed since the last poll; whether anything did."""
        changed = self._maybe_summary()
        events = self._new_events()
        now = self._clock()
        for event in events:
            if event.get("event") == "batch_start":
                self._summary_due = True
            self.view.apply(event, now)
        if events and self._summary_due:
            changed |= self._maybe_summary()
        return changed or bool(events)

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
        summary = self._read_summary(path)
        if not isinstance(summary, dict):
            return False
        self._summary_mtime = mtime
        self._summary_due = False
        self.view.load_summary(summary)
        # Every event again over it, in order: each job ends in its newest state, and the
        # events say what the summary does not (when jobs started, the breakers, controls).
        self._offset, self._partial, self._inode = 0, b"", None
        while True:
            events = self._new_events()
            if not events:
                return True
            for event in events:
                self.view.apply(event, self._clock())

    def _new_events(self) -> list[dict[str, Any]]:
        """The complete lines appended since the last read, as events."""
        try:
            fd = os.open(self._events, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return []
        try:
            stat = os.fstat(fd)
            if stat.st_ino != self._inode or stat.st_size < self._offset:
                self._inode, self._offset, self._partial = stat.st_ino, 0, b""
            os.lseek(fd, self._offset, os.SEEK_SET)
            data = os.read(fd, MAX_READ)
        finally:
            os.close(fd)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            self._partial = b""
        events = []
        for line in lines:
            if not line or len(line) > MAX_LINE:
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict):
                events.append(event)
        return events


def _read_summary(path: Path) -> Any:
    from batch.results.summary import read_summary

    try:
        return read_summary(path.parent)
    except (OSError, ValueError):
        return None
