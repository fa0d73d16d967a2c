"""Offline bundles: everything a node without network needs to set up and deploy a site.

A bundle is a directory laid out like this (the one CI gets, ../shared/spack, has the first
four entries only):

    SHA256SUMS                          sha256 of every other file (sha256sum -c format)
    SHA256SUMS.asc                      its detached OpenPGP signature by the release key
    release-key.asc                     that key's public half (trusted only by fingerprint)
    spack-<tag>.tar.gz                  the pinned Spack, a `git archive` of its commit
    spack-packages-<tag>.tar.gz         the pinned builtin repository, likewise
    mirror/                             a Spack source mirror
    buildcache/                         a signed Spack build cache (optional)
    wheels/                             the Python tools of the lock requirements.txt (optional)
    samples/                            the published GRIB the nightly checks use (optional)
    sbom/                               the CycloneDX SBOM of the deployment's current release
                                        (<release id>.cdx.json), what the build cache holds
    iostack/                            this repository at one commit (optional)

`bin/iostack setup --spack-bundle DIR`, run from a checkout the admin already trusts (never
the bundle's own copy, which cannot vouch for the bundle it came in), checks every sum, then
who vouches for them (`vouch`): a signature by a key the admin holds (a fingerprint in that
checkout's pins.json `release_keys`, or a key ring named with --keyring), or, for a bundle
without one, that everything it holds is checked by content against that checkout (the
Spack archives by pins.json's `tar_sha256`, the mirror's sources by the recipes'
checksums). It unpacks Spack and spack-packages into the cache directory, each archive
checked by content against pins.json, and registers the mirror and build cache for every
site (see `spack.config.registered_mirrors_file`). `bin/iostack bundle` writes one (a single
tar file holding such a directory), signed.
"""
from __future__ import annotations

import logging
import dataclasses
import os
import pathlib
import shutil
import tarfile

import gzip
import hashlib

from iostack.core import archives, digest, openpgp, paths, pins, provenance
from iostack.core.errors import IostackError
from iostack.core.process import capture, run
from iostack.site.target import Target
from iostack.spack import config

log = logging.getLogger(__name__)

SUMS = "SHA256SUMS"
# Payload a bundle may hold besides SHA256SUMS; every file in them must be covered by it.
# (iostack/ is checked file by file against its sums, but may gain files: set-up makes .venv
# and deploy/ inside it.)
CHECKED_DIRS = ("mirror", "buildcache", "wheels", "samples", "sbom")
COMMIT_MARKER = ".iostack-commit"
SIGNATURE = SUMS + ".asc"
SIGNER_KEY = "release-key.asc"
#: what the admin's checkout itself checks by content, so that a bundle holding nothing else
#: needs no signature: the Spack archives (pins.json's tar_sha256) and the source mirror
#: (Spack checks every archive against its recipe's sha256, and our git-pinned sources
#: against theirs). Build caches, wheels, samples and a repository copy need a signature.
CONTENT_CHECKED_DIRS = ("mirror/_source-cache/",)


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


# --- who vouches for the sums ---------------------------------------------------------------

HOW_TO_TRUST = ("to trust the release key, add its fingerprint to pins.json `release_keys` in "
                "the checkout that runs set-up, or name a key ring you hold with --keyring FILE; "
                "--insecure-unsigned uses the bundle all the same")


@dataclasses.dataclass(frozen=True)
class Voucher:
    """Who vouches for a bundle's sums: a signer the admin trusts (its primary fingerprint,
    and the key file that holds its public key), or nobody (the bundle holds only what the
    admin's checkout checks by content, or --insecure-unsigned said to go on)."""
    signer: str | None
    keyfile: pathlib.Path | None
    how: str

    def key(self) -> bytes | None:
        """The signer's armoured public key alone (needs gpg, which set-up installs)."""
        return openpgp.only_key(self.keyfile, self.signer) if self.signer and self.keyfile else None


def unchecked_payload(sums: dict[str, str]) -> list[str]:
    """What the sums cover that the admin's checkout does not check by content itself."""
    spack = {pins.SPACK["archive"], pins.SPACK_PACKAGES["archive"]}
    return sorted(n for n in sums if n not in spack and not n.startswith(CONTENT_CHECKED_DIRS))


def vouch(bundle: pathlib.Path, keyrings: list[pathlib.Path], insecure: bool = False) -> Voucher:
    """Who vouches for the bundle (see Voucher), or BundleError in one line. Call it after
    verify(): it trusts the sums only as far as a signature or the content checks go."""
    sums = read_sums(bundle)
    signature = bundle / SIGNATURE
    if signature.is_file():
        carried = [bundle / SIGNER_KEY] if (bundle / SIGNER_KEY).is_file() else []
        try:
            signer, keyfile = openpgp.signer(bundle / SUMS, signature, keyrings, carried,
                                             pins.RELEASE_KEYS)
        except openpgp.SignatureRefused as e:
            if not insecure:
                raise BundleError(f"{e}; {HOW_TO_TRUST}") from None
            return _insecurely(bundle, str(e))
        return Voucher(signer, keyfile, f"{SUMS} is signed by release key {signer}, which you trust")
    unchecked = unchecked_payload(sums)
    if not unchecked:
        for pin in (pins.SPACK, pins.SPACK_PACKAGES):
            check_archive(bundle / pin["archive"], pin)
        return Voucher(None, None, f"{bundle} is not signed and needs no signature: this "
                       "checkout checks all it holds by content (the Spack archives against "
                       "pins.json, the mirror's sources against the recipes' sha256)")
    if not insecure:
        more = f" and {len(unchecked) - 1} more" if len(unchecked) > 1 else ""
        raise BundleError(f"{bundle} is not signed (no {SIGNATURE}) and holds {unchecked[0]}"
                          f"{more}, which this checkout cannot check by content: use a bundle "
                          f"`bin/iostack bundle` signed; {HOW_TO_TRUST}")
    return _insecurely(bundle, f"no {SIGNATURE}")


def _insecurely(bundle: pathlib.Path, why: str) -> Voucher:

    log.warning(f"WARNING: --insecure-unsigned: nothing vouches for {bundle} ({why}); "
          "its build cache keys are not trusted")
    return Voucher(None, None, f"--insecure-unsigned: nothing vouches for {bundle}")


def sign(top: pathlib.Path, fingerprint: str, ring: pathlib.Path,
         passphrase_file: pathlib.Path | None = None) -> pathlib.Path:
    """SHA256SUMS.asc by the release key, and its public half beside it (release-key.asc,
    which a checkout that pins only the fingerprint verifies with)."""
    (top / SIGNER_KEY).write_bytes(openpgp.export(fingerprint, ring))
    return openpgp.sign(top / SUMS, fingerprint, ring, passphrase_file)


def tar_commit(archive: pathlib.Path) -> str | None:
    """The commit `git archive` records in a tarball's pax header (git get-tar-commit-id): a
    label, which survives any change to the files; only named in messages."""
    with tarfile.open(archive) as tar:
        return tar.pax_headers.get("comment")


def tar_sha256(archive: pathlib.Path) -> str:
    """sha256 of the archive's tar stream, uncompressed: the content, whatever compressed
    it. For a `git archive` it is what `git archive --format=tar --prefix=TOP/ COMMIT |
    sha256sum` prints for its commit (pins.json's tar_sha256)."""
    h = hashlib.sha256()
    opener = gzip.open if archive.name.endswith(".gz") else open
    with opener(archive, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_archive(archive: pathlib.Path, pin: dict) -> None:
    """BundleError unless the archive's content is the pinned commit's (its tar stream's
    sha256 is pins.json's tar_sha256), whatever its header says."""
    found = tar_sha256(archive)
    if found != pin["tar_sha256"]:
        raise BundleError(f"{archive.name} is not the pinned {pin['tag']} ({pin['commit'][:12]}): "
                          f"its tar stream's sha256 is {found[:16]}, pins.json says "
                          f"{pin['tar_sha256'][:16]} (its header claims commit "
                          f"{(tar_commit(archive) or 'none')[:12]})")


def unpack(archive: pathlib.Path, dest: pathlib.Path, pin: dict) -> None:
    """Unpack a pinned `git archive` tarball into dest, after checking its content. The tree
    appears at dest only when complete; dest/.iostack-commit records the commit."""
    check_archive(archive, pin)
    if dest.exists():
        if installed_commit(dest) == pin["commit"]:
            log.info(f"{dest} is already {pin['tag']} ({pin['commit'][:12]})")
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
    log.info(f"unpacked {archive.name} ({pin['tag']}, {pin['commit'][:12]}) into {dest}")


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
        return capture(provenance.git(tree, "rev-parse", "HEAD")).stdout.strip() or None
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
            log.info(f"registered the bundle's {kind} {where} for every site ({out})")
    if (bundle / "samples").is_dir():
        install_tree(bundle / "samples", cache / "samples")
        log.info(f"the bundle's published GRIB samples are in {cache / 'samples'}")
    return out


def _archive(pin: dict, cache: pathlib.Path, spack_tree: pathlib.Path, dest: pathlib.Path):
    """The pinned tarball: the one set-up verified, or a `git archive` of the pinned clone."""
    kept = cache / "archives" / pin["archive"]
    if kept.is_file() and tar_sha256(kept) == pin["tar_sha256"]:
        shutil.copy2(kept, dest / pin["archive"])
        return
    if installed_commit(spack_tree) != pin["commit"] or not (spack_tree / ".git").exists():
        raise BundleError(f"neither the verified {pin['archive']} nor a clone of {pin['tag']} "
                          f"is on this node (looked in {kept.parent} and {spack_tree})")
    top = pin["archive"].split("-v")[0]
    run(provenance.git(spack_tree, "archive", "--format=tar.gz", f"--prefix={top}/",
                       "-o", dest / pin["archive"], pin["commit"]))
    check_archive(dest / pin["archive"], pin)


def write_sums(top: pathlib.Path) -> None:
    lines = [f"{sha256(f)}  ./{f.relative_to(top)}" for f in sorted(top.rglob("*"))
             if f.is_file() and f.relative_to(top).as_posix() not in (SUMS, SIGNATURE, SIGNER_KEY)]
    (top / SUMS).write_text("\n".join(lines) + "\n")


def carry_sbom(root: pathlib.Path, dest: pathlib.Path) -> None:
    """The current release's SBOM (deploy wrote it), for the security office of the node
    the bundle goes to."""
    from iostack.deployment import releases, sbom

    current = releases.current(root)
    doc = releases.releases_dir(root) / current / sbom.SBOM if current else None
    if doc is None or not doc.is_file():
        log.info(f"note: no SBOM in the bundle: {root} has no current release with one "
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
        log.info(f"note: the bundle holds commit {commit[:12]}; uncommitted changes "
              "are not in it")
    work = out.with_name(out.name + ".partial.d")
    if work.exists():
        shutil.rmtree(work)
    top = work / f"iostack-bundle-{site}"
    (top / "iostack").mkdir(parents=True)
    archive = capture(provenance.git(paths.REPO, "archive", "--format=tar", commit), check=True,
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
    # exactly the lock's files, each checked against its sha256 there; wheels, not sdists:
    # an sdist needs its build requirements at install time, and the air-gapped node has
    # only what the bundle holds
    run([sys.executable, "-m", "pip", "download", "-q", "--require-hashes", "--no-deps",
         "--only-binary=:all:", "-d", top / "wheels", "-r", paths.REPO / "requirements.txt"])
    from iostack.regression import samples

    for name in samples.SOURCES:
        samples.fetch(name, top / "samples")
    carry_sbom(root, top / "sbom")
    write_sums(top)
    key = mirrors.signing_key(target, None)
    try:
        sign(top, key, settings.key_ring)
    finally:
        runner.stop_gpg_agent(settings)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        tar.add(top, arcname=top.name)
    partial.rename(out)
    shutil.rmtree(work)
    size = out.stat().st_size
    log.info(f"bundle of site {site} at commit {commit[:12]}: {out} "
          f"({size / 2**20:.0f} MiB), {SUMS} signed by release key {key}.\n"
          "On the offline node, set up with a checkout of iostack you already trust, never "
          "the bundle's own copy (it cannot vouch for the bundle it came in); that checkout "
          f"checks the signature against the fingerprints in its pins.json `release_keys`, or "
          f"a key ring you name with --keyring:\n"
          f"  tar xf {out.name}\n"
          f"  /path/to/your/iostack/bin/iostack setup --spack-bundle {top.name} "
          f"[--keyring YOUR-COPY-OF-THE-RELEASE-KEY.asc]\n"
          "then deploy the commit it carries, as set-up verified it:\n"
          f"  IOSTACK_VENV=/path/to/your/iostack/.venv {top.name}/iostack/bin/iostack deploy "
          f"--site {site}")
    return out
