"""One regression at a time on a deployment root: runs share its stage directories, its
junit file and log, and their performance numbers would disturb each other. The lock file
says who holds it; a second run waits for it, up to its own deadline.

flock(2) on a file under the root: the kernel releases it when its holder exits, so a
killed run leaves no stale lock, and the lock is handed to ReFrame (an inherited
descriptor), so it is held until ReFrame itself ends.
"""
from __future__ import annotations

import logging
import contextlib
import datetime
import fcntl
import getpass
import os
import pathlib
import shlex
import socket
import sys
import time

from iostack.core.errors import Failed

log = logging.getLogger(__name__)

POLL = 2.0


def holder_line() -> str:
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"pid {os.getpid()} on {socket.gethostname()}, user {getpass.getuser()}, since "
            f"{started}: {shlex.join(['bin/iostack', *sys.argv[1:]])}")


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 4096).decode(errors="replace").strip() or "an unknown process"


@contextlib.contextmanager
def hold(path: pathlib.Path, deadline: float):
    """Hold the lock at `path` until the block ends; yields its (inheritable) descriptor.
    Waits while another run holds it, and fails at `deadline` (time.monotonic()), naming
    the holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        said = ""
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(fd)
                if time.monotonic() >= deadline:
                    raise Failed(f"another run holds {path} ({holder}) and this run's time "
                                 "is up; nothing was run") from None
                if holder != said:
                    log.info(f"waiting for the run holding {path}: {holder}")
                    said = holder
                time.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
        os.ftruncate(fd, 0)
        os.pwrite(fd, (holder_line() + "\n").encode(), 0)
        os.set_inheritable(fd, True)
        yield fd
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
