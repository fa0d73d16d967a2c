"""One sha256 over a directory tree, for what must be found unchanged: a release's module
tree (releases.switch refuses one changed since it was built) and the in-repo recipes'
sources (each recipe records its source's, tests/unit/test_recipes.py). Standard library."""
from __future__ import annotations

import hashlib
import os
import pathlib


def file_sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_sha256(top: pathlib.Path) -> str:
    """sha256 over every entry under `top`: relative path, kind, bytes or link target, and
    whether a file is executable. Any changed byte, name, link or mode changes it."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        base = pathlib.Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = base / name
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                h.update(f"link\0{rel}\0{os.readlink(path)}\n".encode())
            elif path.is_dir():
                h.update(f"dir\0{rel}\n".encode())
            else:
                exe = "x" if os.access(path, os.X_OK) else "-"
                h.update(f"file\0{rel}\0{exe}\0{file_sha256(path)}\n".encode())
    return h.hexdigest()
