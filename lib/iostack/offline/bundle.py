"""Offline bundles: everything a node without network needs to set up and deploy a site.

A bundle is a directory laid out like this (the one CI gets, ../shared/spack, has the first
four entries only):

    SHA256SUMS                          sha256 of every other file (sha256sum -c format)
    spack-<tag>.tar.gz                  the pinned Spack, a `git archive` (commit in its header)
    spack-packages-<tag>.tar.gz         the pinned builtin repository, likewise
    mirror/                             a Spack source mirror
    buildcache/                         a signed Spack build cache (optional)
    wheels/                             the Python tools of requirements.txt (optional)
    samples/                            the published GRIB the nightly checks use (optional)
    sbom/                               the CycloneDX SBOM of the deployment's current release
                                        (<release id>.cdx.json), what the build cache holds
    iostack/                            this repository at one commit (optional)

`bin/iostack setup --spack-bundle DIR` verifies it, unpacks Spack and spack-packages into
the cache directory after checking their commits against pins.json, and registers the
mirror and build cache for every site (see `spack.config.registered_mirrors_file`). `bin/iostack bundle`
writes one (a single tar file holding such a directory).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import tarfile

from iostack.core import archives, digest, paths, pins, provenance
from iostack.core.errors import IostackError
from iostack.core.process import capture, run
from iostack.site.target import Target
from iostack.spack import config

SUMS = "SHA256SUMS"
# Payload a bundle may hold besides SHA256SUMS; every file in them must be covered by it.
# (iostack/ is checked file by file against its sums, but may gain files: set-up makes .venv
# and deploy/ inside it.)
CHECKED_DIRS = ("mirror", "buildcache", "wheels", "samples", "sbom")
COMMIT_MARKER = ".iostack-commit"


class BundleError(IostackError):
    """A bundle that must not be used; the message is the one line the admin sees."""


sha256 = digest.file_sha256


def read_sums(bundle: pathlib.Path) -> dict[str, str]:
    """{relative path: sha256} from SHA256SUMS."""
    sums_file = bundle / SUMS
    if not sums_file.is_file():
        raise BundleError(f"{bundle} is not an offline bundle: it has no {SUMS}")
    sums = {}
    for n, line in enumerate(sums_file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise BundleError(f"{sums_file}:{n}: not a sha256sum line: {line[:80]!r}")
        sums[os.path.normpath(name.removeprefix("*"))] = digest
    return sums


def verify(bundle: pathlib.Path) -> dict[str, str]:
    """Check every sum, and that every payload file is covered by one."""
    sums = read_sums(bundle)
    for name, recorded in sorted(sums.items()):
        f = bundle / name
        if not f.is_file():
            raise BundleError(f"{SUMS} lists {name}, which is missing from {bundle}")
        if sha256(f) != recorded:
            raise BundleError(f"{bundle / name} does not match its sha256 in {SUMS}: "
                              "the bundle is damaged or was tampered with")
    payload = [bundle / pins.SPACK["archive"], bundle / pins.SPACK_PACKAGES["archive"]]
    for d in CHECKED_DIRS:
        if (bundle / d).is_dir():
            payload += [p for p in (bundle / d).rglob("*") if p.is_file()]
    for f in payload:
        if not f.is_file():
            raise BundleError(f"{bundle} lacks {f.name}, the pinned archive set-up needs")
        if os.path.normpath(str(f.relative_to(bundle))) not in sums:
            raise BundleError(f"{f} is not covered by {SUMS}: the bundle was changed after "
                              "it was made")
    return sums


def tar_commit(archive: pathlib.Path) -> str | None:
    """The commit `git archive` records in a tarball's pax header (git get-tar-commit-id)."""
    with tarfile.open(archive) as tar:
        return tar.pax_headers.get("comment")


def unpack(archive: pathlib.Path, dest: pathlib.Path, pin: dict) -> None:
    """Unpack a pinned `git archive` tarball into dest, after checking its commit. The tree
    appears at dest only when complete; dest/.iostack-commit records the commit."""
    commit = tar_commit(archive)
    if commit != pin["commit"]:
        raise BundleError(f"{archive.name} is commit {commit or 'unknown'}, not the pinned "
                          f"{pin['tag']} ({pin['commit'][:12]}) of pins.json")
    if dest.exists():
        if installed_commit(dest) == pin["commit"]:
            print(f"iostack: {dest} is already {pin['tag']} ({pin['commit'][:12]})")
            return
        raise BundleError(f"{dest} exists and is not the pinned {pin['tag']}; remove it and "
                          "run set-up again")
    partial = dest.with_name(dest.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            tops = {m.name.split("/")[0] for m in tar.getmembers() if m.name not in ("", ".")}
            if len(tops) != 1:
                raise BundleError(f"{archive.name} has {len(tops)} top directories, expected one")
            extract(tar, partial)
        top = partial / tops.pop()
        (top / COMMIT_MARKER).write_text(pin["commit"] + "\n")
        top.rename(dest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    print(f"iostack: unpacked {archive.name} ({pin['tag']}, {pin['commit'][:12]}) into {dest}")


def extract(tar: tarfile.TarFile, dest: pathlib.Path) -> None:
    """extractall, refusing what would land or point outside dest (iostack.core.archives)."""
    try:
        archives.extract(tar, dest)
    except archives.UnsafeArchive as e:
        raise BundleError(str(e)) from None


def installed_commit(tree: pathlib.Path) -> str | None:
    """The commit of a Spack or spack-packages tree: a clone's HEAD, or the marker unpack wrote."""
    marker = tree / COMMIT_MARKER
    if marker.is_file():
        return marker.read_text().strip()
    head = tree / ".git" / "HEAD"
    if head.is_file():
        return capture(["git", "-C", tree, "rev-parse", "HEAD"]).stdout.strip() or None
    return None


def keep_archives(bundle: pathlib.Path, cache: pathlib.Path) -> None:
    """Keep the verified Spack archives, so `bin/iostack bundle` can pass them on."""
    (cache / "archives").mkdir(parents=True, exist_ok=True)
    for pin in (pins.SPACK, pins.SPACK_PACKAGES):
        shutil.copy2(bundle / pin["archive"], cache / "archives" / pin["archive"])


def bundle_mirrors(source: pathlib.Path | None, binary: pathlib.Path | None) -> list[config.Mirror]:
    """The mirrors of a bundle copied to `source` and `binary` (either may be None)."""
    return ([config.source_mirror("iostack-source", source)] if source else []) + (
        [config.build_cache("iostack-buildcache", binary)] if binary else [])


def install_tree(src: pathlib.Path, dest: pathlib.Path) -> None:
    """Copy src to dest, replacing what dest held only once the copy is complete."""
    partial = dest.with_name(dest.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    shutil.copytree(src, partial)
    if dest.exists():
        shutil.rmtree(dest)
    partial.rename(dest)


def register(bundle: pathlib.Path, cache: pathlib.Path) -> pathlib.Path:
    """Copy the bundle's mirror and build cache into the cache directory and register them."""
    source = binary = None
    if (bundle / "mirror").is_dir():
        source = cache / "mirrors" / "source"
        install_tree(bundle / "mirror", source)
    if (bundle / "buildcache").is_dir():
        binary = cache / "mirrors" / "buildcache"
        install_tree(bundle / "buildcache", binary)
    # replacing Spack's public mirror: nothing is fetched from anywhere but the bundle's
    out = config.write_mirrors(config.registered_mirrors_file(cache), bundle_mirrors(source, binary),
                               replace=True, written_by="`bin/iostack setup --spack-bundle`")
    for kind, where in (("source mirror", source), ("build cache", binary)):
        if where:
            print(f"iostack: registered the bundle's {kind} {where} for every site ({out})")
    if (bundle / "samples").is_dir():
        install_tree(bundle / "samples", cache / "samples")
        print(f"iostack: the bundle's published GRIB samples are in {cache / 'samples'}")
    return out


def _archive(pin: dict, cache: pathlib.Path, spack_tree: pathlib.Path, dest: pathlib.Path):
    """The pinned tarball: the one set-up verified, or a `git archive` of the pinned clone."""
    kept = cache / "archives" / pin["archive"]
    if kept.is_file() and tar_commit(kept) == pin["commit"]:
        shutil.copy2(kept, dest / pin["archive"])
        return
    if installed_commit(spack_tree) != pin["commit"] or not (spack_tree / ".git").exists():
        raise BundleError(f"neither the verified {pin['archive']} nor a clone of {pin['tag']} "
                          f"is on this node (looked in {kept.parent} and {spack_tree})")
    top = pin["archive"].split("-v")[0]
    run(["git", "-C", spack_tree, "archive", "--format=tar.gz", f"--prefix={top}/",
         "-o", dest / pin["archive"], pin["commit"]])


def write_sums(top: pathlib.Path) -> None:
    lines = [f"{sha256(f)}  ./{f.relative_to(top)}" for f in sorted(top.rglob("*"))
             if f.is_file() and f.name != SUMS]
    (top / SUMS).write_text("\n".join(lines) + "\n")


def carry_sbom(root: pathlib.Path, dest: pathlib.Path) -> None:
    """The current release's SBOM (deploy wrote it), for the security office of the node
    the bundle goes to."""
    from iostack.deployment import releases, sbom

    current = releases.current(root)
    doc = releases.releases_dir(root) / current / sbom.SBOM if current else None
    if doc is None or not doc.is_file():
        print(f"iostack: note: no SBOM in the bundle: {root} has no current release with one "
              "(bin/iostack deploy writes it)")
        return
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(doc, dest / f"{current}.cdx.json")


def write(target: Target, out: pathlib.Path,
          buildcache: pathlib.Path | None = None) -> pathlib.Path:
    """One tar file, iostack-bundle-<site>/ inside, laid out as the module docstring says."""
    import sys

    from iostack.spack import mirrors, runner

    site, root, settings = target.site, target.root, target.settings
    commit = provenance.head_commit()
    if not commit:
        raise BundleError("bundle needs the repository as a git checkout")
    if provenance.has_changes():
        print(f"iostack: note: the bundle holds commit {commit[:12]}; uncommitted changes "
              "are not in it")
    work = out.with_name(out.name + ".partial.d")
    if work.exists():
        shutil.rmtree(work)
    top = work / f"iostack-bundle-{site}"
    (top / "iostack").mkdir(parents=True)
    archive = capture(["git", "-C", paths.REPO, "archive", "--format=tar", commit], check=True,
                      text=False).stdout
    import io

    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        extract(tar, top / "iostack")
    spack_root, spack_packages = runner.locate(settings)
    _archive(pins.SPACK, settings.cache, spack_root, top)
    _archive(pins.SPACK_PACKAGES, settings.cache, spack_packages, top)
    mirrors.create_source_mirror(target, top / "mirror")
    if buildcache is None:
        buildcache = mirrors.push(target, root / "buildcache")
    shutil.copytree(buildcache, top / "buildcache")
    # wheels, not sdists: an sdist needs its build requirements (setuptools, ...) at
    # install time, and the air-gapped node has only what the bundle holds
    run([sys.executable, "-m", "pip", "wheel", "-q", "-w", top / "wheels",
         "-r", paths.REPO / "requirements.txt"])
    from iostack.regression import samples

    for name in samples.SOURCES:
        samples.fetch(name, top / "samples")
    carry_sbom(root, top / "sbom")
    write_sums(top)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        tar.add(top, arcname=top.name)
    partial.rename(out)
    shutil.rmtree(work)
    size = out.stat().st_size
    print(f"iostack: bundle of site {site} at commit {commit[:12]}: {out} "
          f"({size / 2**20:.0f} MiB); on the offline node:\n"
          f"  tar xf {out.name} && {top.name}/iostack/bin/iostack setup --spack-bundle "
          f"{top.name}\n  {top.name}/iostack/bin/iostack deploy --site {site}")
    return out
