"""Unpacking a tar archive without letting it write outside its destination: tarfile's own
`data` filter where this Python has it (3.12, and 3.11.4 on), else the same refusals made
here (Debian 12's python3 is 3.11.2, so there this is the path taken). Standard library only.

The refusals are checked member by member, just before each is written, against what the
members before it put on disk: a path is only outside once the links it passes through
exist. `x -> .` and then `x/../escaped` look harmless as names (the second resolves to
`<dest>/escaped` while `x` is not there yet), but once `x` is a link to `<dest>`, `x/..` is
`<dest>`'s parent."""
from __future__ import annotations

import copy
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
    extract_checked(tar, dest, chosen)


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _refuse(tar: tarfile.TarFile, member: tarfile.TarInfo, why: str) -> UnsafeArchive:
    return UnsafeArchive(f"{_name(tar)}: {why} {member.name!r}")


def _checked(tar: tarfile.TarFile, member: tarfile.TarInfo, root: str) -> tarfile.TarInfo:
    """The member as it may be written under `root` now (the `data` filter's rules: no
    device, nothing outside, no link pointing outside, no setuid or group/world-write bits,
    owned by whoever unpacks), or UnsafeArchive."""
    if member.isdev():
        raise _refuse(tar, member, "device or pipe")
    if os.path.isabs(member.name):
        raise _refuse(tar, member, "absolute member")
    where = os.path.join(root, member.name)
    if not _inside(root, os.path.realpath(where)):
        raise _refuse(tar, member, f"would land outside {root}: member")
    if member.issym() or member.islnk():
        if os.path.isabs(member.linkname):
            raise _refuse(tar, member, "absolute link")
        base = os.path.dirname(where) if member.issym() else root
        if not _inside(root, os.path.realpath(os.path.join(base, member.linkname))):
            raise _refuse(tar, member, f"points outside {root}: link")
    safe = copy.copy(member)
    safe.uid, safe.gid, safe.uname, safe.gname = os.getuid(), os.getgid(), "", ""
    safe.mode = member.mode & 0o755
    if member.isreg() or member.islnk():
        safe.mode |= 0o600
    return safe


def extract_checked(tar: tarfile.TarFile, dest: pathlib.Path,
                    members: list[tarfile.TarInfo]) -> None:
    """extractall with the `data` filter's refusals, for a Python without that filter; each
    member checked just before it is written. Directories get their modes last (as
    extractall does), so a read-only one does not stop its own members."""
    dest.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(dest)
    directories, links = [], []
    # our own checks are made: a Python that has filters is told not to add its own
    trusted: dict = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    for member in members:
        safe = _checked(tar, member, root)
        if safe.isdir():
            directories.append(safe)
        elif safe.issym():
            links.append(safe)
        tar.extract(safe, root, set_attrs=not safe.isdir(), **trusted)
    # a link checked when written may point elsewhere once later members exist
    for link in links:
        if not _inside(root, os.path.realpath(os.path.join(root, link.name))):
            raise _refuse(tar, link, f"points outside {root} once unpacked: link")
    for directory in sorted(directories, key=lambda d: d.name, reverse=True):
        path = os.path.join(root, directory.name)
        tar.chmod(directory, path)
        tar.utime(directory, path)
