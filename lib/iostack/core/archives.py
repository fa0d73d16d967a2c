"""Unpacking a tar archive without letting it write outside its destination: tarfile's own
`data` filter where this Python has it (3.12, and 3.11.4 on), else the same refusals
checked here first (Debian 12's python3 is 3.11.2). Standard library only."""
from __future__ import annotations

import os
import pathlib
import tarfile
from collections.abc import Iterable

from iostack.core.errors import IostackError


class UnsafeArchive(IostackError):
    """A member that would land, or link, outside the destination, or a device file."""


def _name(tar: tarfile.TarFile) -> str:
    return os.fsdecode(tar.name) if tar.name else "the archive"


def extract(tar: tarfile.TarFile, dest: pathlib.Path,
            members: Iterable[tarfile.TarInfo] | None = None) -> None:
    """tar.extractall(dest) of `members` (default: all), or UnsafeArchive naming the member
    that would land or point outside `dest`, or be a device."""
    chosen = list(tar.getmembers() if members is None else members)
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(dest, members=chosen, filter="data")
        except tarfile.FilterError as e:
            raise UnsafeArchive(f"{_name(tar)}: {e}") from None
        return
    root = dest.resolve()
    for member in chosen:
        target = (dest / member.name).resolve()
        if target != root and root not in target.parents or member.isdev():
            raise UnsafeArchive(f"{_name(tar)}: member {member.name!r} would land outside "
                                f"{dest}")
        if member.issym() or member.islnk():
            link = (target.parent / member.linkname).resolve()
            if root not in link.parents and link != root:
                raise UnsafeArchive(f"{_name(tar)}: link {member.name!r} points outside {dest}")
    tar.extractall(dest, members=chosen)
