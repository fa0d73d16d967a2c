"""`bin/iostack image RELEASE`: a release as one squashfs file, as Stackinator/uenv ship a
software environment: immutable by construction, copied to an air-gapped cluster as one
file and checked by one checksum.

The image is the part of the deployment root the release needs at run time, at the same
paths, so it is mounted at the deployment root the release was built for (its install
prefixes, module files and spider cache name absolute paths there), without root:

    squashfuse <root>/images/<release>.squashfs <root>      # users: fusermount3 -u <root>
    module use <root>/current/modulefiles/Core

It holds
    opt/<prefix>            every install prefix of the release (its SBOM's installed
                            components), and Spack's opt/bin/sbang if the tree has one
    opt/.spack-db/index.json
                            Spack's install database, the records of the release's lock
                            only, so Spack on the mounted image (`spack find`, `spack test
                            run`, the smoke check) knows what it installed and nothing else
    releases/<id>/          the release's module tree, spider cache, FDB config, lock, SBOM,
                            its Spack environment's files (not .spack-env/, Spack's state),
                            and its release.json as built (no verdict, pid or image fields:
                            they change after the image is made); not its reframe/ (run
                            state)
    current -> releases/<id>

It is reproducible, the same release giving the same bytes: the tree is streamed to
mksquashfs as a tar in sorted order, every entry owned by root, every time set to the
release's creation time (SOURCE_DATE_EPOCH), no extended attributes, mksquashfs's
reproducible layout. Its sha256 goes into release.json (`image_sha256`).

A nightly of a release mounted from its image (`bin/iostack nightly --image FILE --state
DIR`) checks that FILE is what is mounted at the root and records its sha256 in the
session's extras; the image is read-only, so the run writes its stage, reports and results
DB under DIR.
"""
from __future__ import annotations

import calendar
import io
import json
import os
import pathlib
import shutil
import stat
import tarfile
import time

from iostack.core import digest, filesystems, process
from iostack.core.errors import Failed, IostackError
from iostack.deployment import releases, sbom
from iostack.site.target import Target

IMAGES = "images"
SUFFIX = ".squashfs"
#: release.json fields that change after the image is made, left out of the image's copy
AFTER_BUILD = ("regression", "regression_rc", "host", "pid", "image", "image_sha256")
#: what of a release is not needed at run time
RUN_STATE = ("reframe",)
#: Spack's own state in an environment (its transaction lock), not the environment
SPACK_ENV_STATE = ".spack-env"
#: Spack's install database, relative to the deployment root (config.yaml's install_tree)
SPACK_DB_INDEX = pathlib.PurePath("opt", ".spack-db", "index.json")


class ImageError(Failed):
    """An image that cannot be made; the message is the one line the admin sees."""


class NotMounted(IostackError):
    """`nightly --image` given an image that is not what is mounted (nothing was run)."""


def default_path(root: pathlib.Path, release: releases.Release) -> pathlib.Path:
    return root / IMAGES / f"{release.id}{SUFFIX}"


def epoch(release: releases.Release) -> int:
    """SOURCE_DATE_EPOCH of the release: its creation time."""
    created = release.meta.get("created")
    if not created:
        raise ImageError(f"release {release.id} has no creation time in {releases.META}")
    return calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))


def image_meta(release: releases.Release) -> bytes:
    meta = {k: v for k, v in release.meta.items() if k not in AFTER_BUILD}
    return (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode()


def install_prefixes(release: releases.Release, target: Target) -> list[pathlib.Path]:
    """The release's install prefixes, as its SBOM names them (made now if the release
    predates SBOMs)."""
    root = target.root
    doc_path = release.path / sbom.SBOM
    doc = json.loads(doc_path.read_text()) if doc_path.is_file() else \
        json.loads(sbom.generate(target, release))
    prefixes = []
    for component in doc.get("components", []):
        props = {p["name"]: p["value"] for p in component.get("properties", [])}
        if "iostack:prefix" in props:
            prefix = pathlib.Path(props["iostack:prefix"])
            if root / "opt" not in prefix.parents or not prefix.is_dir():
                raise ImageError(f"release {release.id}: {component['name']} is installed at "
                                 f"{prefix}, not under {root / 'opt'}")
            prefixes.append(prefix)
    return sorted(prefixes)


def members(release: releases.Release, target: Target) -> list[pathlib.Path]:
    """Every path of the live tree the image holds (directories before their contents)."""
    root = target.root
    tops = [*install_prefixes(release, target)]
    if (root / "opt" / "bin" / "sbang").exists():
        tops.append(root / "opt" / "bin")
    tops += sorted(p for p in release.path.iterdir() if p.name not in RUN_STATE
                   and p.name != releases.META and not p.name.startswith("."))
    found = []
    for top in tops:
        found.append(top)
        if top.is_dir() and not top.is_symlink():
            for dirpath, dirnames, filenames in os.walk(top):
                if top.name == "spack-env":
                    dirnames[:] = [d for d in dirnames if d != SPACK_ENV_STATE]
                dirnames.sort()
                base = pathlib.Path(dirpath)
                found += [base / n for n in sorted(dirnames + filenames)]
    return found


def spack_db_index(release: releases.Release, root: pathlib.Path) -> bytes:
    """The deployment's Spack install database with the records of the release's lock only
    (every other release's installs are not in the image). Spack's own format, filtered, not
    rewritten: its version and each record as Spack wrote them."""
    index = root / SPACK_DB_INDEX
    if not index.is_file():
        raise ImageError(f"release {release.id}: no Spack install database at {index}")
    db = json.loads(index.read_text())
    locked = json.loads((release.path / "spack.lock").read_text())["concrete_specs"]
    installs = db["database"]["installs"]
    # a lock also names build dependencies a deploy from a build cache never installed:
    # Spack's record of each (installed or not) is kept as it is
    db["database"]["installs"] = {h: installs[h] for h in sorted(locked) if h in installs}
    return (json.dumps(db, sort_keys=True) + "\n").encode()


def _info(arcname: str, st: os.stat_result | None, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname)
    info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "root", "root"
    info.mode = stat.S_IMODE(st.st_mode) if st else 0o755
    return info


def stream(release: releases.Release, target: Target, out, mtime: int) -> None:
    """The image's tree as a tar stream: parents first, sorted, owner root, one time."""
    root = target.root
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        dirs_done: set[str] = set()

        def parents(rel: pathlib.PurePath):
            for parent in reversed(rel.parents[:-1]):
                if str(parent) not in dirs_done:
                    dirs_done.add(str(parent))
                    info = _info(str(parent), os.stat(root / parent), mtime)
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)

        seen_inodes: dict[tuple[int, int], str] = {}
        for path in members(release, target):
            rel = path.relative_to(root)
            parents(rel)
            st = os.lstat(path)
            info = _info(str(rel), st, mtime)
            if stat.S_ISLNK(st.st_mode):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                dirs_done.add(str(rel))
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in seen_inodes:
                    info.type, info.linkname = tarfile.LNKTYPE, seen_inodes[key]
                    tar.addfile(info)
                    continue
                seen_inodes[key] = str(rel)
                info.size = st.st_size
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                raise ImageError(f"{path} is neither a file, a directory nor a link")
        for made_path, made in ((SPACK_DB_INDEX, spack_db_index(release, root)),
                                (pathlib.PurePath(releases.RELEASES, release.id, releases.META),
                                 image_meta(release))):
            parents(made_path)
            info = _info(str(made_path), None, mtime)
            info.mode, info.size = 0o644, len(made)
            tar.addfile(info, io.BytesIO(made))
        link = _info(releases.CURRENT, None, mtime)
        link.type, link.linkname, link.mode = tarfile.SYMTYPE, f"{releases.RELEASES}/{release.id}", 0o777
        tar.addfile(link)


def mksquashfs_command(out: pathlib.Path, mtime: int) -> list[str]:
    exe = shutil.which("mksquashfs")
    if not exe:
        raise ImageError("mksquashfs not found: install squashfs-tools (system-packages.toml)")
    return [exe, "-", str(out), "-tar", "-noappend", "-reproducible", "-mkfs-time", str(mtime),
            "-all-time", str(mtime), "-all-root", "-root-mode", "755", "-root-time", str(mtime),
            "-no-xattrs", "-quiet", "-no-progress"]


# the image's checksum is a file's (release.json, sessions, tests call image.sha256)
sha256 = digest.file_sha256


def build(release: releases.Release, target: Target, out: pathlib.Path | None = None,
          record: bool = True) -> tuple[pathlib.Path, str]:
    """Write the release's image (default <root>/images/<id>.squashfs) whole or not at all;
    returns (path, sha256) and records both in release.json."""
    if release.verdict == releases.BUILDING and release.in_progress():
        raise ImageError(f"release {release.id} is still being built")
    if not (release.modulefiles / "Core").is_dir():
        raise ImageError(f"release {release.id} has no module tree ({release.modulefiles}/Core)")
    out = out or default_path(target.root, release)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    mtime = epoch(release)
    cmd = mksquashfs_command(partial, mtime)
    # the times are the command line's (mksquashfs refuses SOURCE_DATE_EPOCH beside them)
    with process.start(cmd, stdin=process.PIPE, stdout=process.PIPE, stderr=process.STDOUT,
                       env_remove=("SOURCE_DATE_EPOCH",)) as proc:
        try:
            stream(release, target, proc.stdin, mtime)
        except BrokenPipeError:
            pass
        except BaseException:
            proc.kill()
            partial.unlink(missing_ok=True)
            raise
        finally:
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()
        said = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ImageError(f"mksquashfs failed (rc {proc.returncode}): "
                         f"{said.strip().splitlines()[-1] if said.strip() else 'no output'}")
    os.replace(partial, out)
    digest = sha256(out)
    if record:
        releases.record(release, image=str(out), image_sha256=digest)
    return out, digest


# --- an image in use ---------------------------------------------------------------------

def verify_mounted(image: pathlib.Path, tree: pathlib.Path) -> str:
    """The sha256 of `image`, after checking that it is the squashfs mounted where the
    release `tree` is (its release.json is the image's, byte for byte)."""
    if not image.is_file():
        raise NotMounted(f"--image {image} is not a file")
    mount = filesystems.mount_of(tree)
    if mount.fstype not in filesystems.IMAGE_TYPES:
        raise NotMounted(f"--image {image}: {tree} is not on a mounted squashfs image "
                         f"({mount.fstype} at {mount.mountpoint}): mount it with `squashfuse "
                         f"{image} <root>` first")
    rel = pathlib.PurePath(os.path.realpath(tree)).relative_to(mount.mountpoint) / releases.META
    unsquashfs = shutil.which("unsquashfs")
    if not unsquashfs:
        raise NotMounted("unsquashfs not found: install squashfs-tools (system-packages.toml)")
    inside = process.capture([unsquashfs, "-cat", image, rel], text=False)
    if inside.returncode != 0 or inside.stdout != (tree / releases.META).read_bytes():
        raise NotMounted(f"--image {image} is not the image mounted at {mount[0]} (its {rel} "
                         "differs)")
    return sha256(image)
