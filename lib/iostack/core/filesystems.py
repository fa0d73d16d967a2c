"""Which file system holds a path, and whether it is full: so that a run that hit ENOSPC
says which file system to free instead of failing somewhere downstream. Standard library
only (the checks' sanity step uses it inside ReFrame)."""
from __future__ import annotations

import os
import pathlib
from typing import NamedTuple

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


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mount_of(path) -> Mount:
    """The mount holding `path` (its nearest existing ancestor), from /proc/self/mountinfo:
    the deepest mount point above the path with the path's device."""
    path = _existing(path).resolve()
    dev = os.stat(path).st_dev
    want = f"{os.major(dev)}:{os.minor(dev)}"
    best = Mount("/", "?", "?")
    best_len = -1
    try:
        lines = pathlib.Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 2:
            continue
        mountpoint = _unescape(fields[4])
        inside = str(path) == mountpoint or str(path).startswith(mountpoint.rstrip("/") + "/")
        if fields[2] == want and inside and len(mountpoint) > best_len:
            best, best_len = Mount(mountpoint, rest[1], rest[0]), len(mountpoint)
    return best


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
