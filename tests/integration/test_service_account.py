"""Issue 33, for real processes: run as root, bin/iostack builds, tests and runs the
regression as the service account (iostack.core.account), never as root, and refuses in one
line, before anything runs, where that account could not work: a checkout it cannot read, a
deployment root whose parent it cannot enter, or an existing root that is not its own."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from iostack.core import paths, trust
from support import account

pytestmark = pytest.mark.skipif(account.service() is None,
                                reason="run as root with the service account (bin/iostack setup)")
IOSTACK = paths.REPO / "bin" / "iostack"


def iostack(*args, cwd=None, exe=IOSTACK):
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300,
                       cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("iostack: error:")]


@pytest.fixture
def open_dir():
    """A directory anyone may enter, as a site's /opt or /srv is."""
    top = pathlib.Path(tempfile.mkdtemp(prefix="iostack-account-", dir="/var/tmp"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_root_makes_a_new_deployment_root_the_accounts_and_runs_the_command_as_it(open_dir):
    """`releases` reads, so it runs as the account and makes nothing; `nightly` on a new root
    gets one the account owns (and ReFrame, run as the account, writes its stage there)."""
    acct = account.service()
    rc, out, err = iostack("releases", "--root", open_dir / "new")
    assert rc == 0, err
    assert f"setpriv --reuid={acct.uid} --regid={acct.gid} --init-groups" in out
    assert not (open_dir / "new").exists()
    rc, out, err = iostack("nightly", "--root", open_dir / "new", "--", "-n", "NoSuchCheck")
    assert rc != 0 and "Traceback" not in err
    assert os.stat(open_dir / "new").st_uid == acct.uid
    made = [p for p in (open_dir / "new").rglob("*") if os.lstat(p).st_uid != acct.uid]
    assert made == [], "root wrote into the account's deployment root"


def test_an_existing_root_that_is_not_the_accounts_is_refused_never_taken_over(open_dir):
    theirs = open_dir / "theirs"
    (theirs / "releases").mkdir(parents=True)
    rc, out, err = iostack("deploy", "--root", theirs, "--skip-regression")
    assert rc == 2 and errors(err) == [
        f"iostack: error: {theirs} is owned by uid 0, not by the service account "
        f"{account.service().name} that builds and tests there: hand it over (chown -R "
        f"{account.service().name}: {theirs}, once you know what is in it) or name another"]
    assert os.stat(theirs).st_uid == 0 and os.stat(theirs / "releases").st_uid == 0
    assert "setpriv" not in out


def test_a_root_whose_parent_the_account_cannot_enter_is_refused(open_dir):
    shut = open_dir / "shut"
    shut.mkdir(mode=0o700)
    rc, out, err = iostack("deploy", "--root", shut / "local", "--skip-regression")
    name = account.service().name
    assert rc == 2 and errors(err) == [
        f"iostack: error: deploy runs as the service account {name}, which cannot reach "
        f"{shut / 'local'}: {shut} is 0700, owned by uid 0: {name} cannot enter it; deploy "
        "where it can (a root whose parents others may enter)"]
    assert not (shut / "local").exists()


@pytest.mark.root_tmp
def test_a_checkout_the_account_cannot_read_is_refused_before_anything_runs(open_dir, tmp_path):
    """Root's own checkout under a 0700 directory (~root, say): the account could not run
    it, so the command stops at once, naming the directory and where to clone instead."""
    shut = open_dir / "home-of-root"
    shut.mkdir(mode=0o700)
    checkout = shut / "iostack"
    shutil.copytree(paths.REPO, checkout, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__",
                                                  *trust.CHECKOUT_SKIPPED))
    env_root = open_dir / "root"
    p = subprocess.run([str(checkout / "bin" / "iostack"), "deploy", "--root", str(env_root)],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "IOSTACK_VENV": str(paths.REPO / ".venv")})
    name = account.service().name
    assert p.returncode == 2 and errors(p.stderr) == [
        f"iostack: error: deploy runs as the service account {name}, which cannot reach "
        f"{checkout}: {shut} is 0700, owned by uid 0: {name} cannot enter it; keep iostack, "
        "its venv and Spack where the account can read them (clone iostack to /opt/iostack, "
        "say, not under /root)"]
    assert not env_root.exists()
