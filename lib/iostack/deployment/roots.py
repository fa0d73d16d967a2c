"""What a command may assume about its deployment root, checked before it does anything:
commands that write (deploy, nightly) need a root they can write, reading commands
(report, record-baseline) need one that holds results, and never create one."""
from __future__ import annotations

import errno
import pathlib
import tempfile

from iostack.core import filesystems
from iostack.core.errors import Failed, IostackError
from iostack.site.target import Target


def require_writable(root: pathlib.Path, subdir: str = "") -> pathlib.Path:
    """Create root/subdir if needed and prove a file can be written in it (a read-only
    mount, missing permissions or a full disk stop the command here, in one line);
    returns root/subdir. For deploy, call it with the root alone."""
    path = root / subdir if subdir else root
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".iostack-write-test-"):
            pass
    except OSError as e:
        raise IostackError((e.errno == errno.ENOSPC and filesystems.full(path))
                           or f"deployment root {root} is not writable: {e.strerror}: "
                              f"{e.filename}") from None
    full = filesystems.full(path)
    if full:
        raise IostackError(f"{full}: free space there or choose another --root")
    return path


def require_results(target: Target) -> pathlib.Path:
    """The results DB a reading command reads, which must exist already."""
    db = target.results_db
    if db.is_file():
        return db
    root = target.root
    where = ("set by RFM_SQLITE_DB_FILE" if target.settings.results_db
             else f"deployment root {root}" + (" exists" if root.is_dir() else " does not exist"))
    raise Failed(f"no results DB at {db} ({where}): check --root / IOSTACK_ROOT, or run "
                 f"`bin/iostack nightly --site {target.site}` first")
