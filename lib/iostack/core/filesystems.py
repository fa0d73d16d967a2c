"""Which file system holds a path, whether it can be written, and whether it is full: so
that a run that hit ENOSPC says which file system to free instead of failing somewhere
downstream. Standard library and util-linux's findmnt (the checks' sanity step uses it
inside ReFrame)."""
from __future__ import annotations

import json
import os
import pathlib
from typing import NamedTuple

from iostack.core import process

#: Free space below which a file system counts as full: a write of a few MiB (a GRIB file,
#: a job script, ReFrame's report) fails there, and XFS and ext4 hold some space back.
FULL_BELOW = 8 << 20


class Mount(NamedTuple):
    mountpoint: str
    source: str
    fstype: str

    def __str__(self):
        return f"{self.mountpoint} ({self.source}, {self.fstype})"


def _existing(path) -> pathlib.Path:
    """The path, or its nearest existing ancestor."""
    path = pathlib.Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def mount_of(path) -> Mount:
    """The mount holding `path` (its nearest existing ancestor), as findmnt --target finds
    it; `/ (?, ?)` when findmnt cannot say. Where mounts are stacked on one mount point
    (an image mounted over a tmpfs that hides a tree), findmnt lists them all, bottom first:
    the path is on the last, the top one."""
    p = process.capture(["findmnt", "-J", "--list", "-o", "TARGET,SOURCE,FSTYPE", "--target",
                         _existing(path).resolve()])
    found = json.loads(p.stdout).get("filesystems", []) if p.returncode == 0 else []
    return Mount(found[-1]["target"], found[-1]["source"], found[-1]["fstype"]) if found else \
        Mount("/", "?", "?")


#: file systems of a release's image (squashfs in the kernel, or through FUSE as users mount
#: it): read-only whatever the mount's flags say (squashfuse mounts rw)
IMAGE_TYPES = ("squashfs", "fuse.squashfuse", "fuse.squashfuse_ll")


def read_only(path) -> bool:
    """Nothing can be written at `path` (its nearest existing ancestor): a read-only mount,
    or an image. access(2) cannot tell: root on a squashfuse mount is allowed to write."""
    if os.statvfs(_existing(path)).f_flag & os.ST_RDONLY:
        return True
    return mount_of(path).fstype in IMAGE_TYPES


def free_bytes(path) -> int:
    st = os.statvfs(_existing(path))
    return st.f_bavail * st.f_frsize


def size_bytes(path) -> int:
    st = os.statvfs(_existing(path))
    return st.f_blocks * st.f_frsize


def full(path, below: int = FULL_BELOW) -> str | None:
    """'file system M (source, type) holding PATH is full: N KiB free of S MiB', or None
    when it has at least `below` bytes free (or the path's file system cannot be read)."""
    try:
        free = free_bytes(path)
        if free >= below:
            return None
        return (f"file system {mount_of(path)} holding {path} is full: {free >> 10} KiB "
                f"free of {size_bytes(path) >> 20} MiB")
    except OSError:
        return None
