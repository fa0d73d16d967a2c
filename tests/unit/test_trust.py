"""Root runs nothing it does not trust (lib/iostack/core/trust.py), as the attack: a checkout,
venv or key ring that someone other than root can write (its mode, its owner or a parent's)
makes every command run as root refuse in one line naming the path; fixing the mode lets it
run. These tests run as root, as the nightly timer does."""
import os
import shutil

import pytest

from iostack.core import paths, trust

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the check is root's: run as root")

NOBODY = 65534


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A copy of this checkout (its code, no outputs) under a root-only 0700 directory, made
    the one the CLI runs from."""
    top = tmp_path / "shared" / "iostack"
    shutil.copytree(paths.REPO, top, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", "deploy", "__pycache__",
                                                  *trust.CHECKOUT_SKIPPED))
    monkeypatch.setattr(paths, "REPO", top)
    return top


@pytest.fixture
def run(iostack, tmp_path):
    """`bin/iostack sites` as root, its cache in the test's directory."""
    def go(**env):
        return iostack("sites", env={"IOSTACK_CACHE": str(tmp_path / "cache"), **env})
    return go


def refused(p, path):
    assert p.returncode == 2, p
    assert p.stderr.startswith(f"iostack: error: refusing to run as root: {path} is "), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""
    return p.stderr


def test_a_group_writable_checkout_is_refused_until_its_mode_is_fixed(checkout, run):
    assert run().returncode == 0
    checkout.chmod(0o775)
    assert "writable by its group (mode 0775)" in refused(run(), checkout)
    checkout.chmod(0o755)
    p = run()
    assert p.returncode == 0 and "local" in p.stdout.split()


def test_a_writable_file_deep_in_the_checkout_is_refused(checkout, run):
    code = checkout / "lib" / "iostack" / "core" / "process.py"
    code.chmod(0o646)
    assert "writable by others (mode 0646)" in refused(run(), code)


def test_a_parent_owned_by_another_user_is_refused(checkout, run):
    # the owner of /shared could rename iostack away and put their own in its place
    os.chown(checkout.parent, NOBODY, NOBODY)
    assert f"owned by uid {NOBODY}" in refused(run(), checkout.parent)


def test_a_sticky_parent_is_safe_only_above_a_root_owned_tree(checkout, run):
    # /tmp-like: anyone may create entries, only their owner may rename or remove them
    checkout.parent.chmod(0o1777)
    assert run().returncode == 0
    os.chown(checkout, NOBODY, NOBODY)
    refused(run(), checkout)


def test_a_sticky_writable_directory_inside_the_tree_is_refused(checkout, run):
    # sticky stops renames, not new files: a new module beside the code would be imported
    (checkout / "lib").chmod(0o1777)
    refused(run(), checkout / "lib")


def test_a_venv_linked_to_a_writable_directory_is_refused(checkout, run, tmp_path):
    venv = tmp_path / "elsewhere" / "venv"
    venv.mkdir(parents=True)
    (checkout / ".venv").symlink_to(venv)
    assert run().returncode == 0
    venv.parent.chmod(0o777)
    refused(run(), venv.parent)


def test_spack_and_the_key_ring_are_checked(checkout, run, tmp_path):
    spack = tmp_path / "spack"
    spack.mkdir()
    spack.chmod(0o775)
    refused(run(SPACK_ROOT=str(spack)), spack)
    ring = tmp_path / "cache" / "gpg"
    ring.mkdir(parents=True)
    os.chown(ring, NOBODY, NOBODY)
    refused(run(), ring)


def test_not_root_is_not_checked_nor_help(checkout, run, iostack, monkeypatch):
    checkout.chmod(0o777)
    p = iostack("--help")
    assert p.returncode == 0 and "usage: iostack" in p.stdout
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert run().returncode == 0
