"""Whether a file's inode number identifies it beyond one mount of its filesystem.

The ledger index keys each record on its stat signature, inode included
(``run_support.ledger_scan``). On most filesystems the inode is the server's or the disk's
own number for the file. sshfs has none to give: SFTP carries no inode, so sshfs (through
FUSE's high-level API) numbers files itself as it first looks each one up, per mount. After
a remount every file has another number, and an index keyed on it serves nothing; within a
mount the numbers still tell a file from the one that replaced it.

Which filesystem a path is on is read from ``/proc/self/mountinfo``, by the device number
its ``stat`` gives. Where that cannot be told (no ``/proc``, a device no line names, as a
btrfs subvolume's), the answer is the stricter one: inodes identify files.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Filesystem types (as ``/proc/self/mountinfo`` names them) that number inodes per mount.
INODES_PER_MOUNT = frozenset({"fuse.sshfs"})
MOUNTINFO = Path("/proc/self/mountinfo")


def filesystem_type(mountinfo: str, device: int) -> str | None:
    """The type of the filesystem that ``mountinfo`` (the text of ``/proc/<pid>/mountinfo``)
    mounts as ``device`` (a ``st_dev``); None when no line names it.

    A line is ``id parent major:minor root mount-point options [optional fields...] -
    type source super-options``; the fields are separated by single spaces, and a space in
    a path is written ``\\040``, so splitting on spaces is exact.
    """
    wanted = f"{os.major(device)}:{os.minor(device)}"
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) < 8 or fields[2] != wanted:
            continue
        try:
            return fields[fields.index("-", 6) + 1]
        except (ValueError, IndexError):  # not a line of that format
            return None
    return None


def inodes_per_mount(path: Path | str) -> bool:
    """Whether ``path`` is on a filesystem whose inode numbers hold only within one mount
    (:data:`INODES_PER_MOUNT`); False when that cannot be told."""
    try:
        device = os.stat(path).st_dev
        mountinfo = MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return False
    return filesystem_type(mountinfo, device) in INODES_PER_MOUNT
