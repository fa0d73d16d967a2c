"""Host-wide resources that tests on other workers (or another run on this machine) share.

Loop devices are one: `losetup -f` hands out the lowest free device, partx adds and drops
/dev/loopNpM nodes that outlive a detach, and libblkid finds a UUID by probing every
device. Two tests that attach, partition and mount at once race there. Seen on two
workers: the cluster's node2 mounted nothing (its fstab's UUID was not found, and `nofail`
hid it) while the nvme_scratch tests partitioned and detached their own devices beside it,
and one of their partitions stayed on /dev/loop1 for the next run to find.

So the tests that touch loop devices hold one exclusive flock for their module (the
`loop_devices` fixture). flock dies with its holder, so a killed run leaves no lock behind.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import tempfile
import time

#: where the lock files live: /run/lock is the host's (FHS), not a test's private /tmp
LOCK_DIR = pathlib.Path("/run/lock") if os.access("/run/lock", os.W_OK) else \
    pathlib.Path(tempfile.gettempdir())


class Busy(Exception):
    """The lock stayed taken for the whole wait."""


@contextlib.contextmanager
def exclusive(name: str, holder: str, wait: float = 3600.0, poll: float = 0.5,
              lock_dir: pathlib.Path | None = None):
    """Hold `name` exclusively while the block runs; wait at most `wait` seconds for it."""
    path = (lock_dir or LOCK_DIR) / f"iostack-tests-{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    held_by = pathlib.Path(path).read_text().strip() or "unknown"
                    raise Busy(f"{path} still held after {wait:g} s by {held_by}") from None
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {holder}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
