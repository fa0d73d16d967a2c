"""Tests that use the host's loop devices never run at once (tests/support/hostlock.py), run
for real: two stand-in modules on xdist's two workers, with the suite's `loop_devices`
fixture, and every module of the suite that touches loop devices declares it."""
from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from support import hostlock

TESTS = pathlib.Path(__file__).parents[1]
CONFTEST = textwrap.dedent(f"""
    import fcntl, importlib.util, json, os, pathlib, time
    import pytest
    from support import hostlock

    hostlock.LOCK_DIR = pathlib.Path(os.environ["LOCK_DIR"])
    spec = importlib.util.spec_from_file_location("iostack_conftest", {str(TESTS / "conftest.py")!r})
    real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real)
    loop_devices = real.loop_devices

    @pytest.fixture(scope="module")
    def device(request):
        # the module's own device: made after the lock is taken, removed before it is given back
        fd = os.open(hostlock.LOCK_DIR / "iostack-tests-loop-devices.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held = True
        os.close(fd)
        start = time.monotonic()
        time.sleep(1.0)
        yield
        with open(os.environ["LOG"], "a") as f:
            f.write(json.dumps({{"module": request.module.__name__, "held": held,
                                "start": start, "end": time.monotonic()}}) + "\\n")
""")
MODULE = textwrap.dedent("""
    import time
    import pytest
    {mark}

    def test_attach(device):
        time.sleep(0.5)
""")
MARK = 'pytestmark = pytest.mark.usefixtures("loop_devices")'
#: what attaching, partitioning or mounting a loop device looks like in a test module
USES_LOOP_DEVICES = re.compile(r'losetup|LocalCluster|running_cluster|"-o", "loop"')


def run_two_modules(tmp_path: pathlib.Path, mark: str) -> list[dict]:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "conftest.py").write_text(CONFTEST)
    for name in ("test_cluster_a.py", "test_scratch_b.py"):
        (tree / name).write_text(MODULE.format(mark=mark))
    log, locks = tmp_path / "log.jsonl", tmp_path / "locks"
    locks.mkdir()
    env = {**os.environ, "LOG": str(log), "LOCK_DIR": str(locks),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-n", "2", "--dist", "loadscope", "-c", os.devnull, "--rootdir", str(tree),
                        # its own, not one beside the outer session's (test_workers.clean_env)
                        "--basetemp", str(tmp_path / "basetemp"), str(tree)], cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_two_modules_with_the_fixture_use_loop_devices_one_after_the_other(tmp_path):
    a, b = sorted(run_two_modules(tmp_path, MARK), key=lambda r: r["start"])
    assert a["held"] and b["held"], "the module's own fixtures ran before the lock was taken"
    assert a["end"] <= b["start"], (a, b)


def test_without_the_fixture_the_same_two_modules_overlap(tmp_path):
    # the control: what the first test would see if the fixture were removed
    a, b = sorted(run_two_modules(tmp_path, ""), key=lambda r: r["start"])
    assert not (a["held"] or b["held"])
    assert b["start"] < a["end"], (a, b)


def hold_in_child(lock_dir: pathlib.Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import pathlib, sys
            from support import hostlock
            with hostlock.exclusive("loop-devices", "the other worker's test_cluster.py",
                                    lock_dir=pathlib.Path({str(lock_dir)!r})):
                print("held", flush=True)
                sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert child.stdout.readline() == "held\n"
    return child


def test_a_waiter_gives_up_in_one_line_naming_the_holder_then_gets_the_lock(tmp_path):
    child = hold_in_child(tmp_path)
    with pytest.raises(hostlock.Busy) as busy:
        with hostlock.exclusive("loop-devices", "me", wait=0.5, poll=0.1, lock_dir=tmp_path):
            pass
    assert str(busy.value) == (f"{tmp_path}/iostack-tests-loop-devices.lock still held after 0.5 s "
                               f"by pid {child.pid}: the other worker's test_cluster.py")
    child.communicate("", timeout=30)
    with hostlock.exclusive("loop-devices", "me", wait=5, lock_dir=tmp_path) as path:
        assert path.read_text() == f"pid {os.getpid()}: me\n"
    assert path.read_text() == ""


def test_a_killed_holder_leaves_no_lock_behind(tmp_path):
    child = hold_in_child(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    with hostlock.exclusive("loop-devices", "me", wait=5, lock_dir=tmp_path):
        pass


def test_every_module_that_uses_loop_devices_holds_the_lock():
    users = {path.relative_to(TESTS).as_posix(): path.read_text()
             for path in sorted(TESTS.rglob("test_*.py"))
             if path.name != "test_hostlock.py" and USES_LOOP_DEVICES.search(path.read_text())}
    # the pattern still finds the known users (else it has rotted, and this test says nothing)
    assert {"integration/test_cluster.py", "integration/test_ansible_nvme_scratch.py",
            "integration/test_nightly_robust.py"} <= set(users)
    assert [name for name, text in users.items() if "loop_devices" not in text] == []
