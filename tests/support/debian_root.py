"""Clean Debian roots for the fresh-node tests: what a cloud image of Debian 12 or 13 holds
(mmdebstrap's minbase, plus python3, git and ca-certificates), with this repository copied in
as a user would clone it.

A root's tarball is made once and kept in the iostack cache (`roots/<release>-minbase.tar`);
each test unpacks its own copy. Commands run in the root through `chroot` inside a mount
namespace of their own (`unshare -m`), so /proc, /sys, /dev and the bind mounts vanish with
them; `net=False` adds a network namespace with no interface but loopback (up, as on any
node: Open MPI's singleton MPI_Init reaches its daemon through it). No daemon of the
root may start on the host: a `policy-rc.d` refuses every start, as container images do, and
`daemons()` lists any process still running with the root as its root directory.

The root reaches the package registries as the host does, through the host's proxy: the
host's CA certificates and pip.conf are copied in and `update-ca-certificates` runs there,
as a site's node image carries its own CA. Downloaded .deb files and pip's cache are kept
between runs (`roots/apt-archives`, `roots/pip-cache`), as a site's apt proxy would.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import shlex
import shutil
import subprocess
import tarfile

from iostack.core import paths
from support import targets

MINBASE_INCLUDE = "python3,git,ca-certificates"
#: where the repository lives in a root (README: set-up runs as root, and clones it where the
#: service account can read it, not under /root)
REPO_IN_ROOT = "/opt/iostack"
#: the offline bundle, mounted read-only
BUNDLE_IN_ROOT = "/bundle"
CLEAN_ENV = {"HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
             "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def cache_dir() -> pathlib.Path:
    return targets.settings().cache / "roots"


def tarball(release: str) -> pathlib.Path:
    """The release's minbase tarball, made with mmdebstrap on first use.

    mmdebstrap picks its output format from the target's name unless told (FORMATS, `auto`):
    the format is given, and the partial file's name ends in `.tar` as well. A cache entry
    that is not a regular tar file (a directory an older fixture left, a truncated file) is
    removed and made again."""
    out = cache_dir() / f"{release}-minbase.tar"
    if out.is_file() and not out.is_symlink() and tarfile.is_tarfile(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in (out, out.with_name(f"{release}-minbase.partial.tar")):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)
    partial = out.with_name(f"{release}-minbase.partial.tar")
    subprocess.run(["mmdebstrap", "--variant=minbase", "--format=tar",
                    f"--include={MINBASE_INCLUDE}", release, str(partial)], check=True)
    if not (partial.is_file() and tarfile.is_tarfile(partial)):
        raise AssertionError(f"mmdebstrap wrote no tar file at {partial}")
    partial.rename(out)
    return out


@dataclasses.dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.startswith("iostack: error:")]


class DebianRoot:
    """One unpacked root under `where`, prepared as a fresh node."""

    def __init__(self, release: str, where: pathlib.Path, trust_ca: bool = True):
        self.release = release
        self.path = where / f"{release}-root"
        self.path.mkdir(parents=True)
        # as root, with its owners, modes and device nodes, as mmdebstrap wrote it
        subprocess.run(["tar", "-C", str(self.path), "-xf", str(tarball(release))], check=True)
        self.binds: list[tuple[pathlib.Path, str, bool]] = []
        rc_d = self.path / "usr/sbin/policy-rc.d"
        rc_d.write_text("#!/bin/sh\n# no daemon of this root starts (invoke-rc.d(8))\nexit 101\n")
        rc_d.chmod(0o755)
        if trust_ca:
            for crt in pathlib.Path("/usr/local/share/ca-certificates").glob("*.crt"):
                shutil.copy2(crt, self.path / "usr/local/share/ca-certificates" / crt.name)
            if pathlib.Path("/etc/pip.conf").is_file():
                shutil.copy2("/etc/pip.conf", self.path / "etc/pip.conf")
            self.run(["update-ca-certificates"], check=True)
        for name, inside in (("apt-archives", "/var/cache/apt/archives"),
                             ("pip-cache", "/root/.cache/pip")):
            kept = cache_dir() / f"{release}-{name}"
            (kept / "partial").mkdir(parents=True, exist_ok=True)
            self.bind(kept, inside)

    def bind(self, host: pathlib.Path, inside: str, read_only: bool = False) -> None:
        """Mount `host` at `inside` for every later command."""
        target = self.path / inside.lstrip("/")
        if pathlib.Path(host).is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        self.binds.append((pathlib.Path(host).resolve(), inside, read_only))

    def copy_repository(self, repo: pathlib.Path = paths.REPO) -> pathlib.Path:
        """The repository as a user clones it, plus this work tree's uncommitted changes to
        tracked files (they show as `-dirty`)."""
        dest = self.path / REPO_IN_ROOT.lstrip("/")
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(repo), str(dest)], check=True)
        changed = subprocess.run(["git", "-C", str(repo), "diff", "--name-only", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout.split()
        for rel in changed:
            if (repo / rel).is_file():
                shutil.copy2(repo / rel, dest / rel)
            else:
                (dest / rel).unlink(missing_ok=True)
        return dest

    def run(self, cmd: list[str] | str, net: bool = True, user: str | None = None,
            env: dict[str, str] | None = None, check: bool = False, timeout: float = 1800,
            cwd: str = REPO_IN_ROOT) -> Run:
        """`cmd` in the root, as root (or `user`), with a clean environment."""
        script = cmd if isinstance(cmd, str) else shlex.join(cmd)
        mounts = [f"mount -t proc proc {self.path}/proc",
                  f"mount --rbind /sys {self.path}/sys", f"mount --rbind /dev {self.path}/dev"]
        for host, inside, ro in self.binds:
            target = f"{self.path}/{inside.lstrip('/')}"
            mounts.append(f"mount --bind {shlex.quote(str(host))} {shlex.quote(target)}")
            if ro:
                mounts.append(f"mount -o remount,ro,bind {shlex.quote(target)}")
        # a list is one command (exec'd); a string is a shell script
        inner = f"cd {shlex.quote(cwd)} 2>/dev/null || cd /; " + (
            script if isinstance(cmd, str) else f"exec {script}")
        chroot = ["chroot", *([f"--userspec={user}"] if user else []), str(self.path),
                  "/bin/sh", "-c", inner]
        environment = {**CLEAN_ENV, **(env or {})}
        if not net:
            mounts.insert(0, "ip link set lo up")   # a new network namespace's lo is down
        outer = " && ".join(mounts) + " && exec env -i " + " ".join(
            f"{k}={shlex.quote(v)}" for k, v in environment.items()) + " " + shlex.join(chroot)
        unshare = ["unshare", "-m", "--propagation", "private", *(["-n"] if not net else [])]
        p = subprocess.run([*unshare, "/bin/sh", "-c", outer], capture_output=True, text=True,
                           timeout=timeout)
        run = Run(p.returncode, p.stdout, p.stderr)
        if check and p.returncode != 0:
            raise AssertionError(f"{script}: rc {p.returncode}\n{run.output[-4000:]}")
        return run

    def installed(self, packages: list[str]) -> set[str]:
        """Those of `packages` that dpkg in the root lists as installed."""
        out = self.run(["dpkg-query", "-W", "-f=${Package}\\t${db:Status-Status}\\n",
                        *packages]).stdout
        return {line.split("\t")[0] for line in out.splitlines() if line.endswith("\tinstalled")}

    def daemons(self) -> list[str]:
        """Processes on the host whose root directory is this root (none may be left)."""
        found = []
        for proc in pathlib.Path("/proc").glob("[0-9]*"):
            try:
                if os.readlink(proc / "root") == str(self.path):
                    found.append(f"{proc.name} {(proc / 'comm').read_text().strip()}")
            except OSError:
                continue
        return found

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
