"""``batch-logs/events.jsonl``: one JSON line per driver event, for humans and post-mortems.

Not part of the resume logic (the ledger is); appended without fsync for that reason.
Past :data:`~batch.event_segments.SEGMENT_BYTES` the file is rotated to
``events-<n>.jsonl`` and compressed to ``events-<n>.jsonl.gz`` on a thread while the sweep
goes on (a million jobs write ~330 MB of events, ~35 MB compressed); readers take the
segments in order (``batch.event_segments``, docs/cli.md#what-it-writes). Every file of
it is opened through ``run_support.safe_files``: a segment or a ``.gz.partial`` that is a
symlink, a FIFO or a device is left alone, never followed, written through or waited on.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batch.event_segments import SEGMENT_BYTES, rotated, segment_name
from run_support.results import utc_stamp
from run_support.safe_files import describe, open_append, open_fd, open_reader


class EventLog:
    def __init__(
        self,
        path: Path,
        redact: Callable[[str], str] = lambda text: text,
        *,
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        self.path = path
        self._redact = redact
        self._segment_bytes = segment_bytes
        self._file = open_append(path)
        # Characters, not bytes: the bound is approximate, and counting is free.
        self._size = _size(path)
        self._compressing: threading.Thread | None = None
        # A driver killed while compressing left a plain segment: compress it now. One that
        # is no regular file (a FIFO, a symlink) is not ours to read: it is said, and left.
        plain = [p for p in rotated(path.parent).values() if p.suffix != ".gz"]
        kinds = {p: _kind(p) for p in plain}
        #: What is left unread, for the driver to say.
        self.unusable = [
            f"{p}: is {kind}, not a regular file; left as it is"
            for p, kind in kinds.items()
            if kind is not None
        ]
        self._compress_later([p for p in plain if kinds[p] is None])

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"t": utc_stamp(), "event": event, **fields}, ensure_ascii=False)
        # A full disk must not take the sweep down over a log meant for humans.
        with contextlib.suppress(OSError):
            self._file.write(self._redact(line) + "\n")
            self._size += len(line) + 1
            if self._size >= self._segment_bytes:
                self._rotate()

    def close(self) -> None:
        self._file.close()
        if self._compressing is not None:
            self._compressing.join()

    def _rotate(self) -> None:
        self._file.close()
        number = max(rotated(self.path.parent), default=0) + 1
        segment = self.path.with_name(segment_name(number))
        os.rename(self.path, segment)
        self._file, self._size = open_append(self.path), 0
        self._compress_later([segment])

    def _compress_later(self, segments: list[Path]) -> None:
        if not segments:
            return
        previous = self._compressing

        def run() -> None:
            if previous is not None:
                previous.join()
            for segment in segments:
                compress(segment)

        # zlib lets go of the GIL while it compresses: the sweep goes on meanwhile.
        self._compressing = threading.Thread(target=run, name="events-gzip", daemon=True)
        self._compressing.start()


def compress(segment: Path) -> None:
    """``segment`` → ``segment.gz``, renamed into place once whole; the plain file is removed
    after. Where it cannot be written (a full disk) the plain segment stays, and is read.
    A segment that is no regular file (a FIFO, a symlink) is left as it is; a
    ``.gz.partial`` that is one is removed (the name, never what it points to) and made
    anew, exclusively."""
    target = segment.with_name(segment.name + ".gz")
    partial = segment.with_name(segment.name + ".gz.partial")
    made = False
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)  # a leftover, or a symlink put there: the name goes
        with open_reader(segment) as source:
            sink_fd = open_fd(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, real_dirs=1)
            made = True
            with open(sink_fd, "wb") as out:
                _gzip_into(source, out)
        os.replace(partial, target)
        os.unlink(segment)
    except OSError:
        if made:
            with contextlib.suppress(OSError):
                os.unlink(partial)


def _gzip_into(source: Any, sink: Any) -> None:
    """``source``'s bytes into ``sink`` as one gzip member, a MiB at a time (as ``gzip``
    writes it, level 6), on a descriptor opened here rather than by ``gzip.open``."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    while chunk := source.read(1 << 20):
        sink.write(deflate.compress(chunk))
    sink.write(deflate.flush())


def _kind(path: Path) -> str | None:
    """What ``path`` is when it is no regular file (a FIFO, a symlink), else None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else describe(mode)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
