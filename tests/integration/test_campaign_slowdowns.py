"""The sensitivity campaign's slowdowns are real (iostack_testbed.campaign): a process in
its cgroups is slowed by the kernel, not by a changed number. Each bound below is one the
cgroup guarantees, whatever the machine's speed: a write of B bytes throttled to R bytes/s
cannot end before B/R; C seconds of CPU under a quota of q per period p cannot take less
than (C - q) / (q/p) seconds of wall time."""
import mmap
import os
import pathlib
import time

import pytest


from iostack_testbed import campaign

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (campaign.CGROUP / "blkio").is_dir()
    or not (campaign.CGROUP / "cpu").is_dir(),
    reason="cgroup v1 blkio and cpu controllers, as root")


def in_group(group, work):
    """Run `work` in a child process inside `group`; its wall seconds."""
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            group.join()
            work()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return time.monotonic() - start


def test_a_throttled_direct_write_takes_at_least_bytes_over_rate(tmp_path):
    device = campaign.block_device(tmp_path)
    assert pathlib.Path(f"/sys/dev/block/{device}").exists()
    rate = 8 << 20
    group = campaign.Cgroup("blkio", {"blkio.throttle.write_bps_device": f"{device} {rate}"})
    target = tmp_path / "direct"
    block = mmap.mmap(-1, 1 << 20)     # page-aligned, as O_DIRECT needs

    def write():
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_DIRECT)
        for _ in range(32):
            os.write(fd, block)
        os.close(fd)

    try:
        # 32 MiB at 8 MiB/s: the first 8 MiB may go at once (the throttle's slice), not more
        seconds = in_group(group, write)
    finally:
        group.remove()
    assert target.stat().st_size == 32 << 20
    assert seconds >= (32 - 8) / 8


def test_a_cpu_quota_stretches_cpu_time_into_wall_time():
    period, quota = 100000, 20000
    group = campaign.Cgroup("cpu", {"cpu.cfs_period_us": str(period),
                                    "cpu.cfs_quota_us": str(quota)})
    cpu_seconds = 0.5

    def spin():
        start = time.process_time()
        while time.process_time() - start < cpu_seconds:
            pass

    try:
        seconds = in_group(group, spin)
    finally:
        group.remove()
    assert seconds >= (cpu_seconds - quota / 1e6) / (quota / period)
