"""Opening the files of a batch dir so that the batch dir cannot be turned against us.

Anyone who can write into a batch dir (a job, a hand edit, another tool) can put a symlink,
a FIFO, a device or a directory where a file of ours should be. Followed, a symlink makes
the driver overwrite or append to a file outside the batch dir; opened, a FIFO blocks the
opener forever (signals included, as ``open()`` is not interrupted); read, ``/dev/zero``
never ends. So every file of a batch dir is opened here: never through a symlink in its
last component (``O_NOFOLLOW``), without blocking (``O_NONBLOCK``), and kept only when
``fstat`` says it is a regular file; reads are bounded. Each refusal is an ``OSError``
whose ``filename`` and ``strerror`` make a one-line message ("is a FIFO, not a regular
file"), so callers that already handle an unreadable or unwritable file handle these too.

A directory of ours is opened the same way (:func:`open_dir`) and used through its
descriptor (``dir_fd``): the ``control/`` dir swapped for a symlink to another directory
is refused, never listed or emptied. Every read is bounded: :func:`read_bytes` by a limit
of its kind of file, a stream (:func:`open_reader`) by the caller's chunk, a compressed
one (:func:`open_gunzip`) by what one read may decompress to (a gzip bomb is decompressed
a chunk at a time, never whole). ``tests/unit/run_support/test_safe_files_used.py`` finds
any file of a batch dir opened another way.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import zlib
from pathlib import Path
from typing import IO, BinaryIO

#: What a record of ours (``result.json``, ``run-meta.json``, a summary) may weigh; a larger
#: one is not a record but an accident or an attack, and reading it would exhaust memory.
MAX_RECORD_BYTES = 1 << 20
#: What a ``run-meta.json`` may weigh. The driver's own are small, but a record written by
#: another tool may be large and is still carried (a 50 MB one, docs/reliability.md): the
#: bound only keeps a sparse file of gigabytes from being read.
MAX_RUN_META_BYTES = 256 << 20

_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND


class UnsafeFileError(OSError):
    """A path of the batch dir is a symlink, a special file or a directory, or too large."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def describe(mode: int) -> str:
    """What kind of file ``mode`` (an ``st_mode``) is, for a message."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _refusal(path: Path | str, mode: int) -> UnsafeFileError:
    what = describe(mode)
    why = f"is {what}, not followed" if stat.S_ISLNK(mode) else f"is {what}, not a regular file"
    return UnsafeFileError(errno.EINVAL, why, str(path))


def parent_fd(path: Path | str, real_dirs: int) -> int:
    """A descriptor of ``path``'s directory, the last ``real_dirs`` components of which
    (the directory itself, its parent, ...) are each opened without following a symlink.

    For a directory of ours inside a batch dir (``batch-logs/``), checked at every write: a
    job that swaps it for a symlink to an outside directory mid-run gets an
    :class:`UnsafeFileError`, never a file written there. Opened component by component
    (``openat``), so nothing can be swapped between the check and the write.
    """
    parent = Path(path).parent
    parts = parent.parts[len(parent.parts) - real_dirs :] if real_dirs > 0 else ()
    top = Path(*parent.parts[: len(parent.parts) - len(parts)]) if parts else parent
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for number, part in enumerate(parts):
        try:
            inner = os.open(part, _DIRECTORY, dir_fd=fd)
        except OSError as exc:
            where = Path(top, *parts[: number + 1])
            try:
                found = os.lstat(part, dir_fd=fd).st_mode
            except OSError:
                found = None
            os.close(fd)
            if found is not None and not stat.S_ISDIR(found):
                raise _refusal(where, found) from exc
            raise
        os.close(fd)
        fd = inner
    return fd


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_fd(path: Path | str, flags: int, mode: int = 0o644, *, real_dirs: int = 0) -> int:
    """``os.open`` for a regular file only: no symlink followed, no blocking on a FIFO.

    With ``real_dirs``, the last that many directories of the path must be real ones too
    (:func:`parent_fd`). Raises :class:`UnsafeFileError` (an ``OSError``) naming ``path``
    when it is anything else, and the usual ``OSError`` when it cannot be opened.
    """
    if not real_dirs:
        return _open_in(None, path, flags, mode)
    dir_fd = parent_fd(path, real_dirs)
    try:
        return _open_in(dir_fd, Path(path).name, flags, mode, shown=path)
    finally:
        os.close(dir_fd)


def _open_in(
    dir_fd: int | None,
    name: Path | str,
    flags: int,
    mode: int = 0o644,
    *,
    shown: Path | str | None = None,
) -> int:
    """:func:`open_fd` for the entry ``name`` of the directory ``dir_fd`` (None: ``name``
    is a path); a refusal names ``shown`` (default ``name``)."""
    shown = name if shown is None else shown
    try:
        fd = os.open(name, flags | _SAFE, mode, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP (a symlink), ENXIO (a FIFO nobody reads), EISDIR...: say what is there.
        try:
            found = os.lstat(name, dir_fd=dir_fd).st_mode
        except OSError:
            raise exc from None
        if not stat.S_ISREG(found):
            raise _refusal(shown, found) from exc
        raise
    try:
        found = os.fstat(fd).st_mode
        if not stat.S_ISREG(found):
            raise _refusal(shown, found)
        if flags & (os.O_WRONLY | os.O_RDWR):
            # Non-blocking was only for the open; a job's stdout must not inherit it.
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path: Path | str, *, real_dirs: int = 1) -> int:
    """A descriptor of the directory ``path``, whose last ``real_dirs`` components (itself,
    its parent, ...) are each a real directory, not a symlink (:func:`parent_fd`). List it
    with ``os.scandir(fd)``, open and unlink in it with ``dir_fd=fd``: nothing done there
    can reach another directory, whatever is swapped in meanwhile."""
    return parent_fd(Path(path) / "-", real_dirs)


def open_reader(path: Path | str, *, dir_fd: int | None = None) -> BinaryIO:
    """A binary file reading the regular file ``path`` (``name`` in ``dir_fd``), opened as
    :func:`open_fd` opens it. The caller bounds each read."""
    return open(_open_in(dir_fd, path, os.O_RDONLY), "rb")


def read_in(dir_fd: int, name: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``name`` in the directory ``dir_fd``;
    more is an :class:`UnsafeFileError`."""
    with open(_open_in(dir_fd, name, os.O_RDONLY), "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFileError(errno.EFBIG, f"larger than {limit:,} bytes, not read", name)
    return data


#: Compressed bytes read at a time by :class:`Gunzip`.
_GZIP_CHUNK = 1 << 16


class Gunzip:
    """A gzip file read back a bounded piece at a time: ``read(size)`` decompresses at
    most ``size`` bytes (zlib's ``max_length``), so 1 MB holding 1 GiB of zeros costs one
    chunk of memory per read, never the GiB. Members follow one another as ``gzip`` reads
    them; a stream cut short raises ``EOFError``, a damaged one ``zlib.error``."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._at_end = False

    def read(self, size: int) -> bytes:
        while not self._at_end:
            inflate = self._inflate
            if inflate.eof:  # a member ended; what follows it is the next one's start
                rest = inflate.unused_data or self._raw.read(_GZIP_CHUNK)
                if not rest:
                    self._at_end = True
                    break
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = self._inflate.decompress(rest, size)
            elif inflate.unconsumed_tail:
                data = inflate.decompress(inflate.unconsumed_tail, size)
            else:
                chunk = self._raw.read(_GZIP_CHUNK)
                if not chunk:
                    raise EOFError("a gzip stream cut short")
                data = inflate.decompress(chunk, size)
            if data:
                return data
        return b""

    def skip(self, count: int) -> None:
        """Read past ``count`` bytes of the decompressed stream, a chunk at a time."""
        while count > 0 and (data := self.read(min(count, _GZIP_CHUNK))):
            count -= len(data)

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()


def open_gunzip(path: Path | str) -> Gunzip:
    """The regular gzip file ``path``, opened as :func:`open_fd` opens it, read back in
    bounded pieces (:class:`Gunzip`)."""
    return Gunzip(open_reader(path))


def read_bytes(path: Path | str, limit: int = MAX_RECORD_BYTES) -> bytes:
    """The bytes of the regular file ``path``; more than ``limit`` (each kind of file has
    its own) is an ``UnsafeFileError``, refused before a byte is read where its size says so."""
    fd = open_fd(path, os.O_RDONLY)
    with open(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size > limit:  # refused before a byte is read (a sparse file of 4 GB)
            raise UnsafeFileError(errno.EFBIG, f"larger than {limit:,} bytes, not read", str(path))
        # No buffer of ``limit`` bytes made up front for a small file (read(n) allocates n).
        want = size + 1
        data = handle.read(want)
        if len(data) == want <= limit:  # it grew since: read on, to the limit
            data += handle.read(limit + 1 - want)
    if len(data) > limit:
        raise UnsafeFileError(errno.EFBIG, f"larger than {limit:,} bytes, not read", str(path))
    return data


def open_append_fd(path: Path | str, *, real_dirs: int = 0) -> int:
    """A descriptor appending to the regular file ``path`` (created if missing)."""
    return open_fd(path, _APPEND, real_dirs=real_dirs)


def open_append(path: Path | str, *, real_dirs: int = 0) -> IO[str]:
    """A line-buffered UTF-8 text file appending to the regular file ``path``."""
    fd = open_append_fd(path, real_dirs=real_dirs)
    return open(fd, "a", encoding="utf-8", errors="replace", buffering=1)


def append_text(path: Path | str, text: str, *, real_dirs: int = 0) -> None:
    """Append ``text`` to the regular file ``path``; raises ``OSError`` like :func:`open_fd`."""
    with open_append(path, real_dirs=real_dirs) as handle:
        handle.write(text)


def ensure_dir(path: Path) -> None:
    """Create the directory ``path`` if missing; refuse one that is a symlink or a file."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(parents=True)
    found = os.lstat(path).st_mode
    if stat.S_ISLNK(found):
        raise _refusal(path, found)
    if not stat.S_ISDIR(found):
        raise UnsafeFileError(errno.ENOTDIR, "is not a directory", str(path))
