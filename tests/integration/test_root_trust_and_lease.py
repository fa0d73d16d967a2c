"""Issue 33, for real processes: bin/iostack run as root refuses, before it starts the venv's
python, a venv someone else can write (the shell entry's check, lib/iostack/core/trust.py);
and a prune on one host meets a deploy holding the root on another (a UTS namespace with its
own host name), is refused naming that host, and takes the root over once the other's lease
has run out (lib/iostack/core/lease.py)."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from iostack.core import paths, trust
from iostack.deployment import releases
from support import account

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root's checks: run as root")


@pytest.fixture
def checkout(tmp_path):
    top = tmp_path / "iostack"
    shutil.copytree(paths.REPO, top, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__",
                                                  *trust.CHECKOUT_SKIPPED))
    return top


@pytest.mark.root_tmp
def test_root_does_not_start_a_venv_others_can_write(checkout, tmp_path):
    # the attacker's python: it would run as root
    venv, ran = tmp_path / "venv", tmp_path / "ran-as-root"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\ntouch {ran}\nexec {sys.executable} \"$@\"\n")
    (venv / "bin" / "python").chmod(0o755)
    venv.chmod(0o775)
    env = {**os.environ, "IOSTACK_VENV": str(venv), "IOSTACK_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([checkout / "bin" / "iostack", "sites"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and not ran.exists()
    assert p.stderr == (f"iostack: error: refusing to run as root: {venv} is writable by its "
                        f"group (mode 0775), who could make root run anything: chmod go-w {venv}\n")
    venv.chmod(0o755)
    p = subprocess.run([checkout / "bin" / "iostack", "sites"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "local" in p.stdout.split() and ran.exists()


HOLD = """
import pathlib, sys, time
from iostack.core import lease
with lease.hold(pathlib.Path(sys.argv[1]), "deploy of local", lease=float(sys.argv[2])):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(not shutil.which("unshare"), reason="unshare (util-linux) not installed")
def test_a_prune_meets_a_deploy_on_another_host_then_outlives_its_lease(tmp_path):
    root = tmp_path / "root"
    for i in range(3):
        rel = root / "releases" / f"2025061{i}T010000Z-c0mm1t{i}-10c4{i}"
        rel.mkdir(parents=True)
        (rel / "release.json").write_text(json.dumps(
            {"id": rel.name, "site": "local", "created": rel.name[:15], "regression": "passed"}))
    os.symlink(f"releases/{rel.name}", root / "current")
    account.give_tree(root)             # prune runs as the service account, whose root it is
    lock = root / releases.ROOT_LOCK
    env = {**os.environ, "PYTHONPATH": str(paths.LIB)}
    other = subprocess.Popen(
        ["unshare", "--uts", "sh", "-c", 'hostname other-node && exec "$@"', "-",
         sys.executable, "-c", HOLD, str(lock), "4"],
        env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "held\n"
        prune = [paths.REPO / "bin" / "iostack", "prune", "--root", root, "--keep", "0",
                 "--keep-installs"]
        p = subprocess.run(prune, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert "deploy of local" in p.stderr and "on host other-node" in p.stderr
        assert "lease ends at" in p.stderr
        assert len(list((root / "releases").iterdir())) == 3
        other.kill()                    # the other host dies holding it: its lease runs out
        other.wait()
        assert json.loads(lock.read_text())["host"] == "other-node"
        time.sleep(5)
        p = subprocess.run(prune, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "took over" in p.stdout and "lease ended" in p.stdout
        assert "removed 1 release(s)" in p.stdout and not lock.exists()
    finally:
        other.kill()
        other.wait()
