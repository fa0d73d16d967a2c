"""A fresh Debian 12 node, as a cloud image has it (minbase with python3, git and
ca-certificates): the README's set-up works from zero with the offline bundle, installs what
deploying needs and none of what only testing needs, starts no daemon on the host, and every
way it can fail ends in one line and a non-zero exit with nothing changed.

The roots come from `support.debian_root` (mmdebstrap, cached between runs). The set-up root
is shared with the Spack tier's fresh-node deploy (tests/spack/test_spack_offline.py)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile

import pytest

from iostack.offline import setup
from support import debian_root

pytestmark = pytest.mark.skipif(not shutil.which("mmdebstrap"),
                                reason="mmdebstrap not installed (system-packages.toml: tests)")

SETUP = ["bin/iostack", "setup", "--spack-bundle", debian_root.BUNDLE_IN_ROOT]
#: what a login node that only deploys must not get (the issue's 1.7 GB came with them)
ONLY_FOR_TESTING = ["chromium", "qemu-user", "gcc-aarch64-linux-gnu", "openfoam", "slurm-wlm",
                    "openssh-server", "mmdebstrap"]


def dpkg_status(root: debian_root.DebianRoot) -> str:
    return hashlib.sha256((root.path / "var/lib/dpkg/status").read_bytes()).hexdigest()


def assert_one_line_and_nothing_changed(run, root, status_before, rc=2):
    assert run.returncode == rc, run.output[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert len(run.error_lines) == 1, run.stderr[-3000:]
    assert dpkg_status(root) == status_before, "set-up changed dpkg's state before failing"
    assert not (root.path / debian_root.REPO_IN_ROOT.lstrip("/") / ".venv").exists()
    return run.error_lines[0]


@pytest.fixture
def bare_root(tmp_path, offline_bundle):
    """A fresh root with the repository and the bundle, before set-up."""
    root = debian_root.DebianRoot("bookworm", tmp_path)
    root.copy_repository()
    root.bind(offline_bundle, debian_root.BUNDLE_IN_ROOT, read_only=True)
    yield root
    root.remove()


# ---- set-up from zero -------------------------------------------------------------------

def test_setup_from_zero_succeeds(fresh_bookworm_node):
    root, run = fresh_bookworm_node
    assert run.returncode == 0, run.output[-4000:]
    assert run.error_lines == []
    assert "iostack: set-up done" in run.stdout
    assert "Traceback" not in run.stderr


def test_setup_installs_what_deploying_needs_and_not_what_testing_needs(fresh_bookworm_node,
                                                                          timings):
    root, _ = fresh_bookworm_node
    deploy = setup.apt_packages("bookworm", ("deploy",))
    assert root.installed(deploy) == set(deploy)
    assert root.installed(ONLY_FOR_TESTING) == set()
    sizes = root.run(["dpkg-query", "-W", "-f=${Installed-Size}\\n"]).stdout.split()
    timings["fresh node: installed packages, MB"] = f"{sum(map(int, sizes)) / 1024:.0f}"


def test_no_daemon_of_the_root_runs_on_the_host(fresh_bookworm_node):
    root, _ = fresh_bookworm_node
    assert root.daemons() == []


def test_setup_again_changes_nothing_and_says_so(fresh_bookworm_node):
    root, _ = fresh_bookworm_node
    status = dpkg_status(root)
    again = root.run(SETUP)
    assert again.returncode == 0, again.output[-3000:]
    n = len(setup.apt_packages("bookworm", ("deploy",)))
    assert f"all {n} system packages (deploy) are installed" in again.stdout
    assert dpkg_status(root) == status


def test_a_registry_that_cannot_be_trusted_is_one_line(fresh_bookworm_node, tmp_path):
    """The node without the site's CA: Debian's own CA list, as the image had it before
    update-ca-certificates took the site's CA in. pip fails on TLS; set-up says why."""
    root, _ = fresh_bookworm_node
    with tarfile.open(debian_root.tarball("bookworm")) as tar:
        member = tar.getmember("./etc/ssl/certs/ca-certificates.crt")
        (tmp_path / "ca-certificates.crt").write_bytes(tar.extractfile(member).read())
    root.bind(tmp_path / "ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", True)
    try:
        run = root.run(["bin/iostack", "setup", "--spack-bundle", debian_root.BUNDLE_IN_ROOT],
                       env={"IOSTACK_VENV": "/tmp/venv-without-the-site-ca"})
    finally:
        root.binds.pop()
    assert run.returncode == 2, run.output[-3000:]
    assert "Traceback" not in run.stderr
    (line,) = run.error_lines
    assert "TLS certificate is not trusted" in line, line


# ---- every failure is one line, and nothing changes --------------------------------------

def test_without_root_set_up_prints_the_apt_line_and_changes_nothing(bare_root):
    bare_root.run(["useradd", "--create-home", "admin"], check=True)
    home = bare_root.path / "home/admin/iostack"
    shutil.copytree(bare_root.path / debian_root.REPO_IN_ROOT.lstrip("/"), home, symlinks=True)
    bare_root.run(["chown", "-R", "admin:admin", "/home/admin/iostack"], check=True)
    status = dpkg_status(bare_root)
    run = bare_root.run(SETUP, user="admin", env={"HOME": "/home/admin"}, cwd="/home/admin/iostack")
    line = assert_one_line_and_nothing_changed(run, bare_root, status)
    assert "set-up needs root for apt" in line
    assert "apt-get update && apt-get install -y --no-install-recommends" in run.stderr


def test_without_network_and_without_a_bundle_is_one_line(bare_root):
    status = dpkg_status(bare_root)
    run = bare_root.run(["bin/iostack", "setup"], net=False)
    line = assert_one_line_and_nothing_changed(run, bare_root, status)
    assert "apt-get update failed: the package registry cannot be reached" in line


def test_a_bundle_with_a_bad_sum_is_refused_before_anything_changes(tmp_path, offline_bundle):
    damaged = tmp_path / "bundle"
    damaged.mkdir()
    for f in offline_bundle.glob("*.tar.gz"):
        shutil.copy2(f, damaged / f.name)
    sums = (offline_bundle / "SHA256SUMS").read_text().splitlines()
    victim = next(i for i, line in enumerate(sums) if line.endswith("spack-v1.1.0.tar.gz"))
    digest, name = sums[victim].split("  ", 1)
    sums[victim] = ("0" if digest[0] != "0" else "1") + digest[1:] + "  " + name
    (damaged / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    (damaged / "mirror").mkdir()
    root = debian_root.DebianRoot("bookworm", tmp_path)
    try:
        root.copy_repository()
        root.bind(damaged, debian_root.BUNDLE_IN_ROOT, read_only=True)
        root.bind(offline_bundle / "mirror", debian_root.BUNDLE_IN_ROOT + "/mirror", True)
        status = dpkg_status(root)
        line = assert_one_line_and_nothing_changed(root.run(SETUP), root, status)
        assert "spack-v1.1.0.tar.gz does not match its sha256 in SHA256SUMS" in line
    finally:
        root.remove()


def test_a_full_disk_is_one_line(bare_root, tmp_path):
    """apt's archive directory on a file system with no room for the downloads."""
    status = dpkg_status(bare_root)
    archives = "/var/cache/apt/archives"
    bare_root.binds = [b for b in bare_root.binds if b[1] != archives]
    run = bare_root.run(f"mount -t tmpfs -o size=1m tmpfs {archives} 2>/dev/null || "
                        f"true; {' '.join(SETUP)}")
    line = assert_one_line_and_nothing_changed(run, bare_root, status)
    assert "apt-get install failed: no space left on device in /var/cache/apt/archives/" in line


def test_apt_held_by_another_process_is_one_line(bare_root):
    """dpkg's frontend lock held as apt and unattended-upgrades hold it (a POSIX record
    lock): set-up waits IOSTACK_APT_LOCK_TIMEOUT seconds, then says which lock."""
    status = dpkg_status(bare_root)
    holder = ("python3 -c 'import fcntl, time; f = open(\"/var/lib/dpkg/lock-frontend\", \"w\");"
              " fcntl.lockf(f, fcntl.LOCK_EX); open(\"/tmp/locked\", \"w\").close(); "
              "time.sleep(600)' & while [ ! -e /tmp/locked ]; do sleep 0.1; done; ")
    run = bare_root.run(holder + " ".join(SETUP) + "; rc=$?; kill $!; exit $rc",
                        env={"IOSTACK_APT_LOCK_TIMEOUT": "1"})
    line = assert_one_line_and_nothing_changed(run, bare_root, status)
    assert "/var/lib/dpkg/lock-frontend is held by another process: wait for it" in line


def test_an_os_set_up_does_not_know_is_one_line(bare_root, tmp_path):
    """The next Debian release (forky), which set-up has no package names for."""
    real = (bare_root.path / "usr/lib/os-release").read_text()
    (tmp_path / "os-release").write_text(
        real.replace("12 (bookworm)", "14 (forky)").replace('VERSION_ID="12"', 'VERSION_ID="14"')
        .replace("VERSION_CODENAME=bookworm", "VERSION_CODENAME=forky"))
    bare_root.bind(tmp_path / "os-release", "/usr/lib/os-release", read_only=True)
    status = dpkg_status(bare_root)
    line = assert_one_line_and_nothing_changed(bare_root.run(SETUP), bare_root, status)
    assert ("set-up knows Debian 12 (bookworm), Debian 13 (trixie), not "
            "Debian GNU/Linux 14 (forky)") in line
    assert "--skip-apt" in line


def test_the_export_of_a_commit_records_that_commit(tmp_path, repo):
    """A node that gets the repository as `git archive` output, not a clone."""
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "HEAD"],
                             capture_output=True, check=True).stdout
    export = tmp_path / "export"
    export.mkdir()
    subprocess.run(["tar", "-x", "-C", str(export)], input=archive, check=True)
    assert not (export / ".git").exists()
    out = subprocess.run(["python3", "-c", "from iostack.core import provenance; "
                          "print(provenance.git_commit())"],
                         env={"PYTHONPATH": str(export / "lib"), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == head
