"""Which filesystems number inodes per mount, told from ``/proc/self/mountinfo``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from run_support import filesystems
from run_support.filesystems import filesystem_type, inodes_per_mount

# Lines as this machine's kernel writes them: optional fields (shared:N) before the "-",
# a space in a mount point as \040, a type with a subtype.
MOUNTINFO = """\
27 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
45 27 0:40 / /tmp/my\\040mnt rw,nosuid,relatime shared:7 master:2 - fuse.sshfs h:/x rw
46 27 0:41 / /mnt/nfs rw,relatime - nfs4 server:/export rw,vers=4.2
"""


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        (os.makedev(8, 1), "ext4"),
        (os.makedev(0, 40), "fuse.sshfs"),
        (os.makedev(0, 41), "nfs4"),
        (os.makedev(0, 99), None),  # no line names it: a btrfs subvolume's own device
    ],
)
def test_the_type_is_read_from_the_line_of_the_device(device: int, expected: str | None) -> None:
    assert filesystem_type(MOUNTINFO, device) == expected


def test_a_line_of_another_format_names_no_type() -> None:
    assert filesystem_type("45 27 0:40 / /mnt rw,relatime no-separator here x\n", 40) is None


def test_a_local_disk_keeps_its_inodes(tmp_path: Path) -> None:
    assert not inodes_per_mount(tmp_path)


def test_where_the_filesystem_cannot_be_told_inodes_are_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stricter answer: the index then keys on the inode, as on a local disk.
    monkeypatch.setattr(filesystems, "MOUNTINFO", tmp_path / "no-such-file")
    assert not inodes_per_mount(tmp_path)
    assert not inodes_per_mount(tmp_path / "gone")
