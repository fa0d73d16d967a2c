"""A user builds on a release with their own Spack, as the release's spack-user/README.md
says (lib/iostack/deployment/upstream.py): an unprivileged account made for the test, with
its own $HOME, its own Spack unpacked from the offline bundle's tarballs, and its own recipe
(fdb-user-build: the CMake project of tests/data/user-build, which links FDB and ecCodes).

`spack -C <release>/spack-user install fdb-user-build` builds that one package and reuses
every other node from the release (each dependency's hash is one of the release's lock);
the program runs on the release's FDB; a version the release does not hold (ecbuild 3.8.5)
is built in the user's tree; no file of the release or its install tree changes; the same
scope works on the release mounted from its image. (The same build without the upstream,
measured once by hand on this 2-core VM while it was busy: 549 s for ecbuild, eckit, metkit,
FDB and the user's package, against 40 s on the release; it is no test: CI would rebuild the
stack for it, and a duration is no verdict.)"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest
from conftest import built_from_source, iostack

from iostack.core import paths, pins
from iostack.deployment import releases, upstream
from support import account

PROJECT = paths.REPO / "tests" / "data" / "user-build"

RECIPE = '''\
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class FdbUserBuild(CMakePackage):
    """A user's program on FDB and ecCodes (iostack's tests/data/user-build)."""

    url = "file://{tarball}"
    version("1.0", sha256="{sha256}")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("fdb")
    depends_on("eccodes")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install(join_path(self.build_directory, "fdb-user-build"), prefix.bin)
'''


@dataclasses.dataclass
class User:
    name: str
    uid: int
    gid: int
    home: pathlib.Path
    #: (a directory other users cannot pass, its child to show them): see reachable_deploy
    mask: tuple[pathlib.Path, str] | None = None

    def run(self, script: str, timeout: float = 1800):
        """`script` in bash as this user, in their $HOME, with nothing of root's environment;
        SPACK_PYTHON: the tests' Python, which has clingo (the node has no network to
        bootstrap it)."""
        env = [f"HOME={self.home}", f"USER={self.name}", f"LOGNAME={self.name}",
               f"PATH={self.home}/spack/bin:/usr/bin:/bin", f"SPACK_PYTHON={sys.executable}"]
        argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                "env", "-i", *env, "bash", "-c", f"set -euo pipefail; cd; {script}"]
        if self.mask:
            top, child = self.mask
            handle = self.home.parent / "handle"    # root's, 0700: the real top, kept
            handle.mkdir(mode=0o700, exist_ok=True)
            mounts = (f'mount --bind "{top}" "{handle}" && '
                      f'mount -t tmpfs -o mode=0755 mask "{top}" && mkdir "{top}/{child}" && '
                      f'mount --bind "{handle}/{child}" "{top}/{child}" && exec "$@"')
            argv = ["unshare", "--mount", "--propagation", "private", "bash", "-c", mounts,
                    "masked", *argv]
        start = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        p.seconds = time.monotonic() - start
        print(f"$ ({self.name}) {script}  # rc {p.returncode}, {p.seconds:.0f} s\n"
              f"{p.stdout[-3000:]}{p.stderr[-3000:]}")
        return p


def snapshot(release: pathlib.Path, opt: pathlib.Path) -> dict[str, tuple]:
    """Every entry of the release (with its files' sha256) and of the install tree (mode,
    size, mtime; its database's sha256): what a user's Spack must leave as it was."""
    seen: dict[str, tuple] = {}
    for top, content in ((release, True), (opt, False)):
        for dirpath, _, filenames in os.walk(top):
            for name in [".", *filenames]:
                path = pathlib.Path(dirpath, name)
                st = os.lstat(path)
                digest = ""
                if stat.S_ISREG(st.st_mode) and (content or path.parent.name == ".spack-db"):
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                seen[str(path)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return seen


@pytest.fixture(scope="module")
def user(offline_bundle):
    """An account of its own (useradd; removed after), its home outside root's reach rules:
    its Spack unpacked from the bundle, its config (install tree in $HOME, the bundle's source
    mirror, builtin from its own spack-packages), and its repo with fdb-user-build."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        pytest.skip("needs root to make an unprivileged account (useradd, setpriv)")
    top = pathlib.Path(tempfile.mkdtemp(prefix="iostack-user-", dir="/var/tmp"))
    top.chmod(0o755)
    # the user's Spack runs on the tests' Python (SPACK_PYTHON, which has clingo: offline,
    # Spack could not bootstrap one): every directory above it must let the user through
    # (a CI clone may sit in a 0700 temporary directory); given back afterwards
    opened = [d for d in pathlib.Path(sys.executable).absolute().parents
              if not d.stat().st_mode & 0o001]
    for d in opened:
        d.chmod(d.stat().st_mode | 0o001)
    name = f"iostack-user{os.getpid() % 100000}"
    home = top / name
    subprocess.run(["useradd", "--create-home", "--home-dir", home, "--shell", "/bin/bash",
                    "--user-group", name], check=True)
    try:
        pw = pwd.getpwnam(name)
        u = User(name, pw.pw_uid, pw.pw_gid, home)
        spack = offline_bundle / f"spack-{pins.SPACK_TAG}.tar.gz"
        builtin = offline_bundle / f"spack-packages-{pins.SPACK_PACKAGES_TAG}.tar.gz"
        # the user's recipe fetches their project's archive, checksum verified as any source
        with tempfile.TemporaryDirectory() as t:
            tarball = pathlib.Path(t) / "fdb-user-build-1.0.tar.gz"
            with tarfile.open(tarball, "w:gz") as tar:
                tar.add(PROJECT, arcname="fdb-user-build-1.0")
            data = tarball.read_bytes()
        recipe = RECIPE.format(tarball=home / "src" / tarball.name,
                               sha256=hashlib.sha256(data).hexdigest())
        setup = f"""
tar xzf {spack} && tar xzf {builtin}
mkdir -p .spack src repo/spack_repo/mine/packages/fdb_user_build
printf 'repo:\\n  namespace: mine\\n  api: v2.2\\n' > repo/spack_repo/mine/repo.yaml
cat > repo/spack_repo/mine/packages/fdb_user_build/package.py
printf 'config:\\n  install_tree:\\n    root: ~/installs\\n' > .spack/config.yaml
printf 'repos:\\n  mine: ~/repo/spack_repo/mine\\n  builtin: ~/spack-packages/repos/spack_repo/builtin\\n' > .spack/repos.yaml
printf 'mirrors:\\n  offline: file://{offline_bundle / "mirror"}\\n' > .spack/mirrors.yaml
"""
        p = subprocess.run(["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--clear-groups",
                            "env", "-i", f"HOME={home}", "bash", "-c", f"set -eu; cd; {setup}"],
                           input=recipe, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        (home / "src" / tarball.name).write_bytes(data)
        os.chown(home / "src" / tarball.name, u.uid, u.gid)
        yield u
    finally:
        for d in opened:
            d.chmod(d.stat().st_mode & ~0o001)
        subprocess.run(["userdel", name], check=False)
        shutil.rmtree(top)


@pytest.fixture(scope="module")
def reachable_deploy(local_deploy, user):
    """The deployment, passable by other users, as a centre's root is: pytest makes its
    temporary directories 0700. The search bit is added to this session's own directories
    (taken back after); pytest's per-user top directory, which any other pytest session on
    the node makes 0700 again when it starts, is masked in the user's mount namespace by a
    0755 tmpfs holding only this session's directory (User.run)."""
    root = local_deploy[0]
    lacking = [d for d in [*reversed(root.parents), root]
               if not stat.S_IMODE(d.stat().st_mode) & 0o001]
    if lacking and lacking[0] != root and os.geteuid() == 0 and shutil.which("unshare"):
        top = lacking.pop(0)
        user.mask = (top, root.relative_to(top).parts[0])
    changed = []
    for d in lacking:
        mode = stat.S_IMODE(d.stat().st_mode)
        d.chmod(mode | 0o001)
        changed.append((d, mode))
    yield root
    user.mask = None
    for d, mode in reversed(changed):
        if d.exists():
            d.chmod(mode)


def installed(user: User, tree: str) -> list[str]:
    """The package prefixes in one of the user's install trees."""
    return sorted(p.name for p in (user.home / tree).glob("*/*") if p.is_dir())


@pytest.fixture(scope="module")
def user_build(reachable_deploy, user, timings):
    """The user's build with the release's scope, the release's state before and after."""
    root = reachable_deploy
    release = releases.find(root, releases.current(root))
    scope = upstream.scope_dir(release.path)
    before = snapshot(release.path, root / "opt")
    spec = user.run(f"spack -C {scope} spec -I -l fdb-user-build")
    assert spec.returncode == 0, spec.stderr[-3000:]
    install = user.run(f"spack -C {scope} install fdb-user-build")
    timings["user's Spack build on the release (upstream)"] = install.seconds
    return root, release, scope, before, spec, install


def test_the_users_spack_builds_only_their_package_and_reuses_every_release_hash(user_build, user):
    root, release, scope, _, spec, install = user_build
    assert install.returncode == 0, install.stderr[-3000:]
    assert built_from_source(install.stdout + install.stderr) == {"fdb-user-build"}
    assert [re.sub(r"-[a-z0-9]{32}$", "", p) for p in installed(user, "installs")] == \
        ["fdb-user-build-1.0"]
    # `spack spec -I` marks the release's installs as an upstream's ([^]): FDB, eckit, metkit
    upstream_marked = {line.split()[2].lstrip("^").split("@")[0]
                       for line in spec.stdout.splitlines() if line.startswith("[^]")}
    assert {"fdb", "eckit", "metkit", "ecbuild"} <= upstream_marked, spec.stdout
    # every node under the user's package is the release's, by hash
    deps = user.run(f"spack -C {scope} find -d --no-groups --format '{{name}} {{hash}}' fdb-user-build")
    nodes = [line.split() for line in deps.stdout.splitlines() if line.strip()]
    assert nodes[0][0] == "fdb-user-build"
    lock = json.loads((release.path / releases.LOCK).read_text())["concrete_specs"]
    assert len(nodes) > 10 and [n for n, h in nodes[1:] if h not in lock] == []
    fdb = {n: h for n, h in nodes}["fdb"]
    assert lock[fdb]["version"] == "5.13.106"


def test_the_users_program_runs_on_the_releases_fdb(user_build, user):
    root, *_ = user_build
    (prefix,) = (user.home / "installs").glob("*/fdb-user-build-1.0-*")
    p = user.run("mkdir -p fdb && printf 'type: local\\nengine: toc\\nschema: /etc/fdb/schema\\n"
                 "spaces:\\n- roots:\\n  - path: '$HOME/fdb'\\n' > fdb.yaml && "
                 f"FDB5_CONFIG_FILE=$HOME/fdb.yaml {prefix}/bin/fdb-user-build")
    assert p.returncode == 0, p.stderr
    assert "fdb5 version 5.13.106" in p.stdout and "fields listed 0" in p.stdout
    mapped = re.findall(r"^mapped (\S*/libfdb5\.so\S*)$", p.stdout, re.M)
    assert mapped and all(m.startswith(f"{root}/opt/fdb-5.13.106-") for m in mapped), p.stdout


def test_a_version_the_release_lacks_is_built_in_the_users_tree(user_build, user):
    *_, scope, _, _, _ = user_build
    p = user.run(f"spack -C {scope} install ecbuild@3.8.5")
    assert p.returncode == 0, p.stderr[-3000:]
    assert built_from_source(p.stdout + p.stderr) == {"ecbuild"}
    assert any(name.startswith("ecbuild-3.8.5-") for name in installed(user, "installs"))


def test_the_release_is_unchanged_by_the_users_builds(user_build, user):
    root, release, _, before, _, _ = user_build
    # after every build the user made on the release
    p = user.run(f"test ! -w {root / 'opt'} && test ! -w {root / 'opt' / '.spack-db'}")
    assert p.returncode == 0, "the user can write into the release's install tree"
    after = snapshot(release.path, root / "opt")
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == []


def test_the_scope_works_on_the_release_mounted_from_its_image(user_build, user):
    """The release's image (bin/iostack image; after the test above: it records the image in
    release.json), mounted by the user with squashfuse at the deployment root, in a mount
    namespace where an empty tmpfs hides the tree it was built in: the user's Spack finds
    the release's installs in the image's database, and the program runs from the image."""
    if not (shutil.which("unshare") and shutil.which("squashfuse") and shutil.which("fusermount3")):
        pytest.skip("needs unshare, squashfuse and fusermount3 (apt: squashfuse, fuse3)")
    root, release, scope, _, _, _ = user_build
    shelf = user.home.parent / "image"          # readable by the user, as a centre's images
    shelf.mkdir(mode=0o755)
    account.give(shelf)                         # bin/iostack image writes as the account
    made = iostack("image", "--root", root, release.id, "-o", shelf / "release.squashfs")
    assert made.returncode == 0, made.error_lines
    (shelf / "release.squashfs").chmod(0o644)
    (prefix,) = (user.home / "installs").glob("*/fdb-user-build-1.0-*")
    hide = user.mask[0] if user.mask else root
    check = user.home / "on-the-image.sh"
    check.write_text(f"""set -euo pipefail
cd
squashfuse {shelf}/release.squashfs {root}
trap 'fusermount3 -u {root}' EXIT
grep -c ' {root} .* - fuse.squashfuse ' /proc/self/mountinfo
spack -C {scope} spec -I -l fdb-user-build
mkdir -p fdb-image
printf 'type: local\\nengine: toc\\nschema: /etc/fdb/schema\\nspaces:\\n- roots:\\n  - path: %s\\n' \\
    "$HOME/fdb-image" > fdb-image.yaml
FDB5_CONFIG_FILE=$HOME/fdb-image.yaml {prefix}/bin/fdb-user-build
""")
    os.chown(check, user.uid, user.gid)
    env = " ".join(f"{k}={v}" for k, v in (("HOME", user.home), ("USER", user.name),
                                           ("PATH", f"{user.home}/spack/bin:/usr/bin:/bin"),
                                           ("SPACK_PYTHON", sys.executable)))
    # /dev/fuse is 0666 on a node; a container may give 0600: the namespace gets its own
    script = f"""
if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
  dev=$(mktemp -d); mount -t tmpfs devfuse "$dev"
  mknod -m 666 "$dev/fuse" c 10 229; mount --bind "$dev/fuse" /dev/fuse
fi
mount -t tmpfs -o mode=0755 hidden {hide}
mkdir -p {root} && chown {user.uid}:{user.gid} {root}
setpriv --reuid={user.uid} --regid={user.gid} --clear-groups env -i {env} bash {check}
"""
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-euo",
                        "pipefail", "-c", script], capture_output=True, text=True, timeout=1800)
    print(p.stdout[-4000:], p.stderr[-4000:])
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[0] == "1"      # the image is what is mounted at the root
    upstream_marked = {line.split()[2].lstrip("^").split("@")[0]
                       for line in p.stdout.splitlines() if line.startswith("[^]")}
    assert {"fdb", "eckit", "metkit", "ecbuild"} <= upstream_marked, p.stdout
    assert "fdb5 version 5.13.106" in p.stdout and "fields listed 0" in p.stdout
