"""Releases of a deployment: every `deploy` builds a new release beside the live one, runs
its regression on it, and only then moves `current` to it, in one rename. Users see only
`current`, so a job never meets a half-written module tree, and an admin can switch back.

    <root>/opt/                  Spack's install tree, shared by every release
    <root>/releases/<id>/        one release, never changed once built:
        release.json             id, site, Spack environment, commit, lock sha256, date,
                                 regression verdict
        spack.lock               the lock it was built from (the checkout's, byte for byte)
        spack-env/               the Spack environment it was concretized and installed in
        modulefiles/             its Lmod tree (Spack's modules and the meta-modules)
        lmod/                    its Lmod spider cache, keyed by the path users use
        etc/fdb5/config.yaml     its FDB config (the FDB data itself is <root>/var/fdb)
        reframe/                 its regression: stage, output, run reports
    <root>/releases/switches.log every switch: when, from, to, who
    <root>/current -> releases/<id>
    <root>/reframe/results.db    every release's regression sessions, for `report`
    <root>/.lock                 who deploys or prunes, on any host (iostack.core.lease)

A release id names its date (UTC), the repository commit and the lock's sha256, sortable
by date: 20250612T013045Z-69e86d3a1b-3f2a9c1b07 (`-dirty` after the commit when the
checkout had changes).
"""
from __future__ import annotations

import logging
import contextlib
import dataclasses
import datetime
import fcntl
import getpass
import hashlib
import json
import os
import pathlib
import shutil
import socket
import time

from iostack.core import digest, lease
from iostack.core.errors import Failed
from iostack.deployment.layout import CURRENT, LOCK, META, RELEASES, is_release
from iostack.site.target import SpackEnv, Target

log = logging.getLogger(__name__)

HISTORY = "switches.log"

# regression verdicts; only PASSED is switched to without --force
BUILDING = "building"
BUILD_FAILED = "build failed"
UNTESTED = "untested"
PASSED = "passed"
FAILED = "failed"


class ReleaseError(Failed):
    """A release operation refused, with the reason in one line."""


@dataclasses.dataclass
class Release:
    path: pathlib.Path
    meta: dict
    #: why its release.json cannot be read, if it cannot
    problem: str | None = None

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def verdict(self) -> str:
        return self.meta.get("regression", "unknown")

    @property
    def created(self) -> str:
        return self.meta.get("created", "")

    @property
    def modulefiles(self) -> pathlib.Path:
        return self.path / "modulefiles"

    @property
    def spack_env(self) -> SpackEnv:
        """The Spack environment it was built from (releases made before release.json had
        `env` named it `site`)."""
        return SpackEnv.parse(self.meta.get("env") or self.meta.get("site", ""))

    @property
    def site(self) -> str:
        return self.spack_env.site

    def env_dir(self) -> pathlib.Path:
        """The Spack environment the release was built in."""
        return self.path / "spack-env" / "sites" / self.spack_env.name

    def in_progress(self) -> bool:
        """Still being built by a live deploy on this host."""
        if self.verdict != BUILDING or self.meta.get("host") != socket.gethostname():
            return False
        try:
            os.kill(int(self.meta.get("pid", 0)), 0)
        except (ProcessLookupError, ValueError):
            return False
        except PermissionError:
            pass
        return True


# --- identity ------------------------------------------------------------------------

def new_id(commit: str, lock_sha256: str, when: datetime.datetime) -> str:
    stamp = when.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base, dirty = commit.removesuffix("-dirty"), commit.endswith("-dirty")
    return f"{stamp}-{base[:10]}{'-dirty' if dirty else ''}-{lock_sha256[:10]}"


def releases_dir(root: pathlib.Path) -> pathlib.Path:
    return root / RELEASES


# --- metadata ------------------------------------------------------------------------

def _write_json(path: pathlib.Path, data: dict) -> None:
    """Write whole or not at all: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def load(path: pathlib.Path) -> Release:
    try:
        meta = json.loads((path / META).read_text())
        if not isinstance(meta, dict) or not meta.get("created") \
                or not (meta.get("env") or meta.get("site")):
            raise ValueError("not a release's record (no created, env or site)")
    except (OSError, ValueError) as e:
        why = f"{e.__class__.__name__}: {e}"
        return Release(path, {"regression": f"unreadable {META}: {e.__class__.__name__}"}, why)
    return Release(path, meta)


def record(release: Release, **fields) -> None:
    release.meta.update(fields)
    _write_json(release.path / META, release.meta)


#: the root's lock that every host honours (deploy and prune hold it)
ROOT_LOCK = ".lock"


def hold_root(root: pathlib.Path, what: str):
    """Hold the deployment root against deploys and prunes on any host (iostack.core.lease):
    a prune must not remove what a deploy elsewhere is building, nor Spack's gc its installs."""
    return lease.hold(root / ROOT_LOCK, what)


@contextlib.contextmanager
def locked(root: pathlib.Path):
    """Serialise what changes the set of releases or `current` (create, switch, prune)."""
    if not releases_dir(root).is_dir():
        raise ReleaseError(f"no releases in {releases_dir(root)}")
    with open(releases_dir(root) / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _account() -> dict:
    """Who builds: root runs builds as its service account (iostack.core.account), so a
    release built as uid 0 shows it."""
    import pwd

    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    return {"user": name, "uid": uid}


def create(root: pathlib.Path, env: SpackEnv, commit: str, lock: pathlib.Path) -> Release:
    """A new, empty release of `env` named by now, the commit and the lock; its lock copied
    in."""
    lock_bytes = lock.read_bytes() if lock.is_file() else b""
    lock_sha256 = hashlib.sha256(lock_bytes).hexdigest() if lock_bytes else "none"
    releases_dir(root).mkdir(parents=True, exist_ok=True)
    with locked(root):
        while True:  # two deploys of one commit and lock in one second: the later waits
            now = datetime.datetime.now(datetime.timezone.utc)
            path = releases_dir(root) / new_id(commit, lock_sha256, now)
            if not path.exists():
                break
            time.sleep(0.1)
        path.mkdir()
        if lock_bytes:
            (path / LOCK).write_bytes(lock_bytes)
        release = Release(path, {})
        record(release, id=path.name, site=env.site, env=env.name, commit=commit,
               spack_lock_sha256=lock_sha256,
               created=now.strftime("%Y-%m-%dT%H:%M:%SZ"), regression=BUILDING,
               host=socket.gethostname(), pid=os.getpid(), built_by=_account())
    return release


@contextlib.contextmanager
def building(release: Release):
    """Record `build failed` if the block does not finish."""
    try:
        yield
    except BaseException:
        record(release, regression=BUILD_FAILED)
        raise


def listing(root: pathlib.Path) -> list[Release]:
    """Every release of the deployment, oldest first."""
    base = releases_dir(root)
    if not base.is_dir():
        return []
    found = [load(p) for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(found, key=lambda r: (r.created, r.id))


def find(root: pathlib.Path, release_id: str) -> Release:
    path = releases_dir(root) / release_id
    if "/" in release_id or release_id.startswith(".") or not (path / META).is_file():
        known = ", ".join(r.id for r in listing(root)) or "none"
        raise ReleaseError(f"no release {release_id!r} in {releases_dir(root)} (releases: {known})")
    return load(path)


# --- the module tree's digest ----------------------------------------------------------

def tree_digest(top: pathlib.Path) -> str:
    """The module tree's sha256 (iostack.core.digest)."""
    return digest.tree_sha256(top)


# --- current, switching ----------------------------------------------------------------

def current(root: pathlib.Path) -> str | None:
    """The id of the current release, None before the first switch."""
    link = root / CURRENT
    if not link.is_symlink():
        if link.exists():
            raise ReleaseError(f"{link} is not a symlink; move it away (releases are switched "
                               "by replacing the symlink)")
        return None
    return pathlib.Path(os.readlink(link)).name


def history(root: pathlib.Path) -> list[dict]:
    log = releases_dir(root) / HISTORY
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def previous(root: pathlib.Path) -> str | None:
    """The release users had before the current one: the last switch's origin, else (no
    history) the newest passed release older than the current one."""
    cur = current(root)
    if cur is None:
        return None
    for entry in reversed(history(root)):
        if entry.get("to") == cur and entry.get("from") not in (None, cur):
            return entry["from"]
    older = [r for r in listing(root) if r.verdict == PASSED and r.id < cur]
    return older[-1].id if older else None


def switch(root: pathlib.Path, release_id: str, force: bool = False) -> tuple[str | None, float]:
    """Point `current` at a release, by renaming a new symlink over the old one (rename(2)
    is atomic: a reader sees the old tree or the new, never none). Refuses a release whose
    regression did not pass unless forced, and one whose module tree changed since it was
    built. Returns (the previous current, seconds the switch took)."""
    start = time.perf_counter()
    with locked(root):
        release = find(root, release_id)
        if release.in_progress():
            raise ReleaseError(f"release {release_id} is still being built (pid {release.meta['pid']})")
        if release.verdict != PASSED and not force:
            rc = release.meta.get("regression_rc")
            why = {FAILED: f"its regression failed{f' (rc {rc})' if rc is not None else ''}; "
                           f"see {release.path / 'reframe'}",
                   BUILD_FAILED: "its build failed",
                   UNTESTED: "its regression was skipped"}.get(
                       release.verdict, f"its regression verdict is {release.verdict!r}")
            raise ReleaseError(f"release {release_id}: {why}, so not switching to it; "
                               "--force switches anyway")
        if not (release.modulefiles / "Core").is_dir():
            raise ReleaseError(f"release {release_id} has no module tree ({release.modulefiles}/Core)")
        recorded = release.meta.get("modulefiles_sha256")
        if recorded and tree_digest(release.modulefiles) != recorded:
            raise ReleaseError(f"release {release_id}: its module tree changed since it was built "
                               f"(sha256 differs from release.json); deploy a new release instead")
        old = current(root)
        link = root / CURRENT
        tmp = root / f".{CURRENT}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        os.symlink(pathlib.Path(RELEASES) / release_id, tmp)
        os.replace(tmp, link)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        seconds = time.perf_counter() - start
        with open(releases_dir(root) / HISTORY, "a") as log:
            log.write(json.dumps({
                "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "from": old, "to": release_id, "user": getpass.getuser(), "forced": force,
                "seconds": round(seconds, 6)}) + "\n")
    return old, seconds


# --- pruning ---------------------------------------------------------------------------

def plan_prune(root: pathlib.Path, keep: int) -> tuple[list[Release], list[Release]]:
    """(to remove, to keep): the `keep` newest releases stay, and always the current one,
    the one before it and any a deploy is still building."""
    if keep < 0:
        raise ReleaseError(f"--keep must be 0 or more, not {keep}")
    every = listing(root)
    # one that cannot be read cannot be dated (it would sort oldest, and go) nor say which
    # installs it needs (gc would remove them): nothing is pruned until it is repaired
    for r in every:
        if r.problem:
            raise ReleaseError(f"release {r.id}: its {META} cannot be read ({r.problem}), so "
                               "prune cannot tell its age nor the installs it needs: nothing "
                               f"was removed; repair or move away {r.path / META}")
    protected = {current(root), previous(root)}
    newest = {r.id for r in every[max(0, len(every) - keep):]} if keep else set()
    remove = [r for r in every
              if r.id not in protected and r.id not in newest and not r.in_progress()]
    return remove, [r for r in every if r not in remove]


def remove(releases: list[Release]) -> None:
    for release in releases:
        # rename first: the release vanishes at once, whatever rmtree meets on the way
        doomed = release.path.with_name(f".removing-{release.id}")
        os.rename(release.path, doomed)
        shutil.rmtree(doomed)


def collect_garbage(target: Target, kept: list[Release]) -> None:
    """Uninstall what no remaining release's environment needs, with Spack's own `spack gc`
    (link and run dependencies of their roots, and build dependencies of roots, stay)."""
    from iostack.spack import runner

    root = target.root
    building = [r.id for r in listing(root) if r.in_progress()]
    if building:
        log.info(f"note: installs left alone: release {', '.join(building)} is being "
              "built, and its installs are not yet in any environment; prune again later")
        return
    envs = [r.env_dir() for r in kept]
    envs = [e for e in envs if (e / "spack.lock").is_file()]
    # the checkout's copy `bin/iostack spack` works in: what it names stays too
    envs += [e for e in sorted((root / "spack-env" / "sites").glob("*")) if (e / "spack.lock").is_file()]
    if not envs:
        log.info("note: installs left alone: no remaining environment says what to keep")
        return
    # the first environment is active for its configuration only (the install tree is
    # <root>/opt there, not Spack's default); with -e given, gc keeps what they all need
    runner.checked(["-e", envs[0], "gc", "-y", "-b", *[a for e in envs for a in ("-e", e)]],
                   target.with_release(None), in_env=False,
                   what="removing the installs no remaining release uses")


def prune(target: Target, keep: int, dry_run: bool = False,
          garbage: bool = True) -> tuple[list[str], list[str]]:
    """Remove all but the `keep` newest releases (see plan_prune), then the installs only
    they used. Returns (removed ids, kept ids)."""
    root = target.root
    if not releases_dir(root).is_dir():
        raise ReleaseError(f"no releases in {releases_dir(root)}")
    # a dry run changes nothing, so it needs no lock
    with contextlib.nullcontext() if dry_run else hold_root(root, "prune"), locked(root):
        gone, kept = plan_prune(root, keep)
        if not dry_run:
            remove(gone)
            if garbage and gone:
                collect_garbage(target, kept)
    return [r.id for r in gone], [r.id for r in kept]


# --- a release's regression --------------------------------------------------------------

def tree_under_test(root: pathlib.Path) -> pathlib.Path:
    """What a nightly run tests: the current release (resolved, so a switch during the run
    does not change the tree under it), or the root itself in the single-tree layout."""
    if (root / CURRENT).is_symlink():
        return (root / CURRENT).resolve()
    return root


def session_extras(tree: pathlib.Path) -> list[str]:
    """ReFrame options naming the release a session ran on (and its lock, not the
    checkout's); ReFrame merges repeated --session-extras, later keys winning."""
    if not is_release(tree):
        return []
    release = load(tree)
    return ["--session-extras",
            f"release={release.id},spack_lock_sha256={release.meta.get('spack_lock_sha256', 'none')}"]


# --- listing ---------------------------------------------------------------------------

def table(root: pathlib.Path) -> str:
    cur, prev = current(root), previous(root)
    rows = [("", "ID", "COMMIT", "LOCK SHA256", "DATE", "REGRESSION", "")]
    for r in listing(root):
        note = "current" if r.id == cur else "previous" if r.id == prev else ""
        if r.in_progress():
            note = f"building (pid {r.meta['pid']})"
        rc = r.meta.get("regression_rc")
        verdict = r.verdict + (f" (rc {rc})" if r.verdict == FAILED and rc is not None else "")
        rows.append(("*" if r.id == cur else "", r.id, r.meta.get("commit", "?")[:16],
                     r.meta.get("spack_lock_sha256", "?")[:12], r.created.replace("T", " "),
                     verdict, note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
