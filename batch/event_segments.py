"""The segments of ``batch-logs/events.jsonl``, and reading them in order across a rotation.

The driver appends to ``events.jsonl``; past :data:`SEGMENT_BYTES` it renames the file to
``events-<n>.jsonl`` (``n`` = 1, 2, ..., oldest first) and compresses that copy to
``events-<n>.jsonl.gz`` while it goes on writing a fresh ``events.jsonl``
(``batch.execution.events``). A ``.gz`` is renamed into place only once it is whole, so a
number with both files (a driver killed between the rename and the unlink) is read from the
``.gz``, and one with only the plain file (killed while compressing) from the plain one.

Every reader of the events goes through here: all of them (:func:`all_lines`, the
report's invocations), those after a :class:`Mark` (``batch steer`` waiting for its
answer), or a stream that follows the live file (:class:`SegmentReader`, ``batch view``).
Each segment is opened through ``run_support.safe_files`` (a symlink, a FIFO or a device
named like a segment is skipped, never followed or waited on), a ``.gz`` is decompressed
a bounded piece at a time, and lines are cut by :class:`Lines`: each byte looked at once,
a line longer than :data:`MAX_LINE` skipped whole (1 GiB of zeros in a segment costs
the time to read it, not a copy of the growing line per chunk).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from batch.layout import EVENTS
from run_support.safe_files import Gunzip, open_gunzip, open_reader

__all__ = [
    "MAX_LINE",
    "SEGMENT_BYTES",
    "Lines",
    "Mark",
    "SegmentReader",
    "all_lines",
    "lines_after",
    "mark",
    "rotated",
    "segment_name",
]

#: About this many bytes of events per segment before it is rotated: ~100,000 jobs' worth,
#: 3-4 MB once compressed.
SEGMENT_BYTES = 32 << 20

#: The longest events line read (the driver's are far shorter); a longer one is skipped.
MAX_LINE = 1 << 20

_ROTATED = re.compile(r"events-(\d+)\.jsonl(\.gz)?")
#: Whatever a damaged segment raises: it is read as far as it is whole.
_UNREADABLE = (OSError, EOFError, zlib.error)


def segment_name(number: int, compressed: bool = False) -> str:
    return f"events-{number:06d}.jsonl" + (".gz" if compressed else "")


def rotated(logs_dir: Path) -> dict[int, Path]:
    """Each rotated segment's number and the file to read it from, oldest first."""
    found: dict[int, Path] = {}
    try:
        names = sorted(os.listdir(logs_dir))
    except OSError:
        return found
    for name in names:
        match = _ROTATED.fullmatch(name)
        if match is None:
            continue
        number = int(match.group(1))
        if match.group(2) or number not in found:  # the whole .gz over the plain copy
            found[number] = Path(logs_dir) / name
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class Mark:
    """A place in the events: byte ``offset`` of the segment numbered ``segment`` (the live
    file is the number it will get when it is rotated)."""

    segment: int
    offset: int


def mark(logs_dir: Path) -> Mark:
    """The end of the events now. The segments are listed before the live file's size is
    taken: a rotation in between makes the mark early (a few lines read again), never late."""
    segments = rotated(logs_dir)
    number = max(segments, default=0) + 1
    try:
        size = (Path(logs_dir) / EVENTS).stat().st_size
    except OSError:
        size = 0
    return Mark(number, size)


class SegmentReader:
    """The events from a :class:`Mark` on, in chunks, across rotations: at the live file's
    end it looks whether that file was rotated meanwhile, reads what was written before it
    was, and goes on in the next. Keeps one file open between reads."""

    def __init__(
        self,
        logs_dir: Path,
        start: Mark = Mark(1, 0),
        *,
        on_skip: Callable[[str], None] | None = None,
    ) -> None:
        """``on_skip`` is told of each segment that cannot be read (a FIFO, a symlink)."""
        self.logs_dir = Path(logs_dir)
        self._on_skip = on_skip
        self.segment = start.segment
        self._offset = start.offset
        self._file: BinaryIO | Gunzip | None = None
        self._live = False

    def read(self, size: int) -> bytes:
        """At most ``size`` bytes after the last read; empty when there is nothing new."""
        while True:
            if self._file is None and not self._open():
                return b""
            assert self._file is not None
            try:
                data = self._file.read(size)
            except _UNREADABLE:
                data = b""
                self._live = False  # a damaged segment: on to the next
            if data:
                return data
            if not self._live:
                self._next()
            elif self.segment in rotated(self.logs_dir):
                self._live = False  # rotated since it was opened: its last lines, then on
            elif self._replaced() and self.segment not in rotated(self.logs_dir):
                self.close()  # another file in its place (a new batch dir): from its start
                self._offset = 0
            else:
                return b""

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _replaced(self) -> bool:
        """Whether the live file's name now holds another file, or it was cut short."""
        assert self._file is not None and not isinstance(self._file, Gunzip)
        try:
            now = (self.logs_dir / EVENTS).stat()
        except OSError:
            return False
        mine = os.fstat(self._file.fileno()).st_ino
        return now.st_ino != mine or now.st_size < self._file.tell()

    def _next(self) -> None:
        self.close()
        self.segment, self._offset = self.segment + 1, 0

    def _open(self, retried: bool = False) -> bool:
        segments = rotated(self.logs_dir)
        later = [number for number in segments if number >= self.segment]
        if later and later[0] > self.segment:  # removed by hand: the next one there is
            self.segment, self._offset = later[0], 0
        path = segments.get(self.segment)
        try:
            if path is None:
                live = open_reader(self.logs_dir / EVENTS)
                if self.segment in rotated(self.logs_dir):  # rotated just now: that one
                    live.close()
                    return self._open()
                self._file, self._live = live, True
                if self._offset:
                    live.seek(self._offset)
            elif path.suffix == ".gz":
                self._file, self._live = open_gunzip(path), False
                self._file.skip(self._offset)
            else:
                self._file, self._live = open_reader(path), False
                self._file.seek(self._offset)
        except _UNREADABLE as exc:
            self.close()
            if self._on_skip is not None and not isinstance(exc, FileNotFoundError):
                where = path or self.logs_dir / EVENTS
                self._on_skip(f"{where}: {getattr(exc, 'strerror', None) or exc}; not read")
            if isinstance(exc, FileNotFoundError):
                # Compressed just now (events-N.jsonl became events-N.jsonl.gz between the
                # listing and the open): a new listing finds it under its new name. Never
                # skipped: its events are read, not lost.
                return path is not None and not retried and self._open(retried=True)
            if path is not None:  # a segment that cannot be read (a FIFO...): the next
                self.segment, self._offset = self.segment + 1, 0
                return self._open()
            return False
        return True


class Lines:
    """Complete lines cut from chunks of bytes, each byte looked at once: the pieces of a
    line are kept until it ends and joined once, and a line longer than ``max_line`` is
    dropped as it grows and skipped to its end."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._pieces: list[bytes] = []
        self._size = 0
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` ends (without their newline), in order."""
        *ended, rest = data.split(b"\n")
        if ended:
            if self._skipping:
                ended[0] = b""  # the end of a line too long to keep: dropped
            elif self._pieces:
                ended[0] = b"".join([*self._pieces, ended[0]])
            self.reset()
        if rest and not self._skipping:
            self._pieces.append(rest)
            self._size += len(rest)
            if self._size > self.max_line:
                self._pieces, self._size, self._skipping = [], 0, True
        limit = self.max_line
        return [line for line in ended if 0 < len(line) <= limit]

    def reset(self) -> None:
        """Forget the line begun (a torn last line of a segment stays torn)."""
        self._pieces, self._size, self._skipping = [], 0, False


def lines_after(
    logs_dir: Path,
    start: Mark,
    chunk: int = 1 << 20,
    *,
    on_skip: Callable[[str], None] | None = None,
) -> Iterator[bytes]:
    """Every complete line from ``start`` on, across rotations, without its newline; an
    empty line or one past :data:`MAX_LINE` is left out. ``on_skip`` is told of each
    segment that cannot be read."""
    reader = SegmentReader(logs_dir, start, on_skip=on_skip)
    lines, segment = Lines(), reader.segment
    try:
        while data := reader.read(chunk):
            if reader.segment != segment:
                lines.reset()
                segment = reader.segment
            yield from lines.feed(data)
    finally:
        reader.close()


def all_lines(logs_dir: Path, on_skip: Callable[[str], None] | None = None) -> Iterator[bytes]:
    """Every complete line of every segment, oldest first."""
    return lines_after(logs_dir, Mark(1, 0), on_skip=on_skip)
