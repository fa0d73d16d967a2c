"""Root runs nothing it does not trust: before a command runs as root, the trees it executes
from (the checkout, the venv, Spack, spack-packages, the key ring) and every directory above
them must be owned by root (or a trusted service account) and writable by nobody else.
Cluster inventories put these trees on shared file systems; whoever can write one, or
rename one of its parents, would get root through the nightly timer.

The checkout is walked whole (its code, recipes and checks are what root runs; it is small),
the other trees at their top only (the venv alone holds tens of thousands of files).

A group- or world-writable parent with the sticky bit (/tmp, /var/tmp) is accepted: there
only an entry's owner may rename or remove it, and the entry below it on the path must be
trusted-owned itself. A writable tree (or a directory inside the checkout) is refused even
when sticky: anyone could add files to it.

What it cannot do: code already running (this module, bin/iostack) comes from the checkout,
so a checkout an attacker has written is beyond saving; the check makes the unsafe
arrangement fail loudly before someone uses it. ACLs and file-system permissions beyond the
mode bits are not read. Stdlib only: bin/iostack runs it with the system python3 before it
starts the venv's."""
from __future__ import annotations

import os
import pathlib
import stat
import sys
from collections.abc import Iterable

from iostack.core.errors import IostackError

#: what the checkout holds that root does not run: outputs (.gitignore), other trees checked
#: on their own (the venv, a deployment root), git's content-addressed objects
CHECKOUT_SKIPPED = {"deploy", "var", ".venv", "build", ".pytest_cache", ".ruff_cache",
                    ".mypy_cache", ".import_linter_cache", "objects", ".spack-env",
                    "output", "stage", "perflogs"}


class Untrusted(IostackError):
    """A tree root would run from can be written by someone else."""


def _owner(uid: int) -> str:
    try:
        import pwd
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _check(path: pathlib.Path, trusted: frozenset[int], inside: bool) -> None:
    """`path` (lstat) is trusted-owned and, unless it is a sticky parent, writable only by
    its owner. `inside`: part of a tree, where sticky does not help."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # not there yet: the directory above decides who may create it
    if st.st_uid not in trusted:
        raise Untrusted(f"refusing to run as root: {path} is owned by {_owner(st.st_uid)}, "
                        "who could make root run anything: chown it to root, or run as that "
                        "user")
    if stat.S_ISLNK(st.st_mode):
        return  # a link's mode means nothing; its directory and its target are checked
    if not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and not inside:
        return
    who = "its group and others" if st.st_mode & stat.S_IWGRP and st.st_mode & stat.S_IWOTH \
        else "its group" if st.st_mode & stat.S_IWGRP else "others"
    raise Untrusted(f"refusing to run as root: {path} is writable by {who} (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}), who could make root run anything: "
                    f"chmod go-w {path}")


def _above(path: pathlib.Path) -> list[pathlib.Path]:
    """The directories above `path`, as written (its links' directories) and resolved (where
    the links lead)."""
    written = pathlib.Path(os.path.abspath(path))
    return [*written.parents, *path.resolve().parents]


def _walk(top: pathlib.Path, skipped: set[str]) -> Iterable[pathlib.Path]:
    for dirpath, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in skipped]
        here = pathlib.Path(dirpath)
        yield from (here / name for name in (*dirs, *files))


def require(checkout: pathlib.Path | None, trees: Iterable[pathlib.Path],
            trusted: Iterable[int] = (0,)) -> None:
    """Refuse (Untrusted, one line naming the path) if root would run from something another
    user can change: `checkout` walked whole, each of `trees` at its top, and the
    directories above them all. A no-op unless the effective uid is 0."""
    if os.geteuid() != 0:
        return
    uids = frozenset(trusted)
    tops = [p for p in (checkout, *trees) if p is not None]
    seen: set[pathlib.Path] = set()
    for top in tops:
        for parent in _above(top):
            if parent not in seen:
                seen.add(parent)
                _check(parent, uids, inside=False)
        for p in {pathlib.Path(os.path.abspath(top)), top.resolve()} - seen:
            seen.add(p)
            _check(p, uids, inside=True)
    if checkout is not None and checkout.resolve().is_dir():
        for p in _walk(checkout.resolve(), CHECKOUT_SKIPPED):
            _check(p, uids, inside=True)


def main(argv: list[str]) -> int:
    """bin/iostack's check before it runs the venv's python: main([checkout, venv])."""
    checkout, *trees = (pathlib.Path(a) for a in argv)
    try:
        require(checkout, trees)
    except Untrusted as e:
        print(f"iostack: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0
