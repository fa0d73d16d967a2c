"""`bin/iostack sbom`: a CycloneDX 1.6 SBOM of what a release installed, for a centre's
security office, written into the release at deploy time (<release>/sbom.cdx.json, named in
release.json) and carried in the offline bundle.

One component per spec of the release's lock that is either installed in the deployment
(its prefix under <root>/opt) or an external (an OS package Spack uses in place): a
build-only dependency a build cache deploy never installed is not in the release, so not
in its SBOM. Each component has
- name, version, and the Spack DAG hash (bom-ref, property `spack:hash`);
- a package URL: `pkg:deb/debian/<package>@<Debian version>?arch=...` for an external a
  Debian package provides (its `debian:` attribute in the site's packages.yaml, or, where
  none is declared, the package dpkg says ships it), else `pkg:generic/<name>@<version>`
  with the source's download URL and checksum (or git URL and commit) as qualifiers;
- its sources as Spack fetches them: URL and sha256, or git URL and commit (also as a
  pedigree commit), for the main archive, each resource and each patch;
- the licence its recipe declares (`license()`), none where the recipe declares none;
- its dependencies, in the document's dependency graph;
- externals: property `iostack:external` true, their prefix and OS package and version.
What Spack knows is read through Spack itself (lib/iostack/deployment/sbom_spack.py, `spack python`);
the document is built and checked against the CycloneDX 1.6 JSON schema with the CycloneDX
Python library, so a document that does not validate is never written.
"""
from __future__ import annotations

import datetime
import json
import os
import pathlib
import shutil
import uuid

from iostack.core import process
from iostack.core.errors import Failed
from iostack.core.settings import Settings
from iostack.deployment import releases
from iostack.site.target import Target

SBOM = "sbom.cdx.json"
SPACK_SCRIPT = pathlib.Path(__file__).with_name("sbom_spack.py")
#: Spack externals no packages.yaml entry describes (Spack detects the C library from the
#: compiler's dynamic linker), and the library whose Debian package provides them
DETECTED_LIBRARY = {"glibc": "libc.so.6"}


class SbomError(Failed):
    """An SBOM that cannot be made; the message is the one line the admin sees."""


# --- what Spack and dpkg know ------------------------------------------------------------

def spack_facts(target: Target, release: releases.Release) -> dict:
    """sbom_spack.py's JSON, run in the release's own environment (as built: never
    refreshed from the checkout)."""
    from iostack.spack import runner

    env_dir = release.env_dir()
    if not (env_dir / releases.LOCK).is_file():
        raise SbomError(f"release {release.id} has no concretized environment ({env_dir}/"
                        f"{releases.LOCK})")
    proc = runner.spack(["-e", env_dir, "python", SPACK_SCRIPT], target.with_release(release.path),
                        in_env=False, capture=True, check=False, capture_stderr=True)
    if proc.returncode != 0:
        raise SbomError(f"reading the specs of release {release.id} through Spack failed: "
                        f"{runner.error_line(proc.stderr)}")
    return json.loads(proc.stdout)


def _dpkg(*args) -> str:
    if not shutil.which("dpkg-query"):
        return ""
    return process.capture(["dpkg-query", *args]).stdout


def native_arch() -> str | None:
    if not shutil.which("dpkg"):
        return None
    return process.capture(["dpkg", "--print-architecture"]).stdout.strip() or None


def distro() -> str | None:
    """debian-12, from os-release (the purl `distro` qualifier)."""
    try:
        fields = dict(line.split("=", 1) for line in
                      pathlib.Path("/etc/os-release").read_text().splitlines() if "=" in line)
    except OSError:
        return None
    name, version = (fields.get(k, "").strip('"') for k in ("ID", "VERSION_ID"))
    return f"{name}-{version}" if name and version else None


def debian_owner(spec: dict, arch: str | None) -> str | None:
    """The Debian package that ships an undeclared external: its `bin/<name>`, or the
    library it is detected by (DETECTED_LIBRARY), of this node's architecture."""
    prefix = spec.get("prefix") or ""
    patterns = [f"*/{DETECTED_LIBRARY[spec['name']]}"] if spec["name"] in DETECTED_LIBRARY \
        else [os.path.join(prefix, "bin", spec["name"])]
    for pattern in patterns:
        for line in _dpkg("-S", pattern).splitlines():
            owners, _, path = line.partition(": ")
            for owner in owners.split(", "):
                name, _, owner_arch = owner.partition(":")
                if owner_arch in ("", arch) and os.path.realpath(path).startswith(
                        (os.path.realpath(prefix) + "/", "/lib/", "/usr/lib/")):
                    return name
    return None


def debian_versions(names: set[str], arch: str | None) -> dict[str, tuple[str, str]]:
    """{package: (version, architecture)} of the installed ones, this node's architecture
    (or `all`) first."""
    if not names:
        return {}
    found: dict[str, tuple[str, str]] = {}
    out = _dpkg("-W", "-f", "${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\n",
                *sorted(names))
    for line in out.splitlines():
        name, version, pkg_arch, status = (line.split("\t") + ["", "", ""])[:4]
        if not status.startswith("ii") or pkg_arch not in (arch, "all"):
            continue
        found[name] = (version, pkg_arch)
    return found


# --- the document ------------------------------------------------------------------------

def components_of(facts: dict) -> list[dict]:
    """The lock's specs the release has: installed ones and externals."""
    return [s for s in facts["specs"] if s["installed"] or s["external"]]


def _purl_and_refs(spec: dict, deb: tuple[str, str, str] | None, dist: str | None):
    from cyclonedx.model import (ExternalReference, ExternalReferenceType, HashAlgorithm,
                                 HashType, XsUri)
    from cyclonedx.model.component import Commit
    from packageurl import PackageURL

    refs, commits, qualifiers = [], [], {}
    for src in spec.get("sources", []):
        hashes = [HashType(alg=HashAlgorithm.SHA_256, content=src["sha256"])] \
            if src.get("sha256") else []
        if src["kind"] == "git":
            refs.append(ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(src["url"]),
                                          comment=f"{src['name']}: commit {src['commit']}"))
            commits.append(Commit(uid=src["commit"], url=XsUri(src["url"])))
            if src["name"] == spec["name"]:
                qualifiers["vcs_url"] = f"git+{src['url']}@{src['commit']}"
        elif src["kind"] == "in-repo":
            refs.append(ExternalReference(
                type=ExternalReferenceType.VCS, url=XsUri(spec.get("homepage") or "urn:iostack"),
                hashes=hashes, comment=f"{src['name']}: {src['path']} of Spack repository "
                f"{src.get('repository', 'iostack')}, in the iostack repository; sha256 over "
                "the tree (packages/spack_repo/iostack/in_repo.py)"))
        else:
            kind = ExternalReferenceType.SOURCE_DISTRIBUTION if src["kind"] == "url" \
                else ExternalReferenceType.OTHER
            refs.append(ExternalReference(type=kind, url=XsUri(src["url"] or "urn:spack:patch"),
                                          hashes=hashes, comment=f"{src['kind']} {src['name']}"))
            if src["name"] == spec["name"] and src.get("sha256"):
                qualifiers.update(download_url=src["url"], checksum=f"sha256:{src['sha256']}")
    if deb:
        package, version, arch = deb
        purl = PackageURL(type="deb", namespace="debian", name=package, version=version,
                          qualifiers={"arch": arch, **({"distro": dist} if dist else {})})
    else:
        purl = PackageURL(type="generic", name=spec["name"], version=spec["version"],
                          qualifiers=qualifiers or None)
    return purl, refs, commits


def _licenses(declared: list[str]):
    from cyclonedx.factory.license import LicenseFactory

    if not declared:
        return []
    text = declared[0] if len(declared) == 1 else " AND ".join(f"({d})" for d in declared)
    return [LicenseFactory().make_from_string(text)]


def document(release: releases.Release, facts: dict, spack_version: str = ""):
    """The release's SBOM as a cyclonedx Bom."""
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.bom_ref import BomRef
    from cyclonedx.model.component import Component, ComponentType, Pedigree

    arch, dist = native_arch(), distro()
    specs = components_of(facts)
    os_package = {}
    for s in specs:
        if s["external"]:
            os_package[s["hash"]] = (s.get("extra_attributes") or {}).get("debian") \
                or debian_owner(s, arch)
    versions = debian_versions({p for p in os_package.values() if p}, arch)
    meta = release.meta
    created = datetime.datetime.strptime(meta["created"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc) if meta.get("created") else None
    stack = Component(
        type=ComponentType.PLATFORM, name=f"iostack-{meta.get('site', '?')}", version=release.id,
        bom_ref=BomRef(f"release-{release.id}"),
        properties=[Property(name=f"iostack:{k}", value=str(meta[k]))
                    for k in ("site", "commit", "spack_lock_sha256") if meta.get(k)])
    bom = Bom(metadata=BomMetaData(component=stack, timestamp=created),
              serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"urn:iostack:release:{release.id}"))
    bom.metadata.tools.components.add(Component(type=ComponentType.APPLICATION, name="iostack",
                                                version=meta.get("commit", "unknown")))
    if spack_version:
        bom.metadata.tools.components.add(Component(type=ComponentType.APPLICATION,
                                                    name="spack", version=spack_version))
    missing = sorted(f"{s['name']}@{s['version']}" for s in facts["specs"]
                     if not (s["installed"] or s["external"]))
    if missing:  # build-only dependencies a build cache deploy needed not
        bom.metadata.properties.add(Property(name="iostack:locked-not-installed",
                                             value=" ".join(missing)))
    by_hash = {}
    for s in specs:
        package = os_package.get(s["hash"])
        deb = (package, *versions[package]) if package in versions else None
        purl, refs, commits = _purl_and_refs(s, deb, dist)
        props = [Property(name="spack:hash", value=s["hash"])]
        if s["external"]:
            props += [Property(name="iostack:external", value="true"),
                      Property(name="iostack:external-prefix", value=s["prefix"])]
            if package:
                props.append(Property(name="iostack:os-package", value=package))
            if deb:
                props.append(Property(name="iostack:os-package-version", value=deb[1]))
        else:
            props.append(Property(name="iostack:prefix", value=s["prefix"]))
        component = Component(
            type=ComponentType.LIBRARY, name=s["name"], version=s["version"],
            bom_ref=BomRef(s["hash"]), purl=purl, licenses=_licenses(s["licenses"]),
            external_references=refs, properties=props,
            pedigree=Pedigree(commits=commits) if commits else None)
        by_hash[s["hash"]] = component
        bom.components.add(component)
    for s in specs:
        deps = [by_hash[d["hash"]] for d in s["dependencies"] if d["hash"] in by_hash]
        bom.register_dependency(by_hash[s["hash"]], deps)
    bom.register_dependency(stack, [by_hash[h] for h in facts["roots"] if h in by_hash])
    return bom


def render(bom) -> str:
    """The document as CycloneDX 1.6 JSON, checked against its schema."""
    from cyclonedx.output.json import JsonV1Dot6
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = JsonV1Dot6(bom).output_as_string(indent=1)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise SbomError(f"the SBOM does not validate against CycloneDX 1.6: {error}")
    return text + "\n"


def spack_version(settings: Settings) -> str:
    """The running Spack's version, as it says it (`spack --version`)."""
    from iostack.spack import runner

    try:
        env = runner.environment(settings, settings.scratch_spack_root)
    except runner.SpackMissing:
        return ""
    proc = process.capture([runner.spack_bin(settings), "--version"], env_extra=env)
    return proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout.strip() else ""


def generate(target: Target, release: releases.Release) -> str:
    try:
        import cyclonedx  # noqa: F401
    except ImportError as e:
        raise SbomError(f"the CycloneDX library is missing from the venv ({e.name}): run "
                        "bin/iostack setup (requirements.txt)") from None
    return render(document(release, spack_facts(target, release),
                           spack_version(target.settings)))


def write(target: Target, release: releases.Release) -> pathlib.Path:
    """<release>/sbom.cdx.json, named in release.json with its sha256."""
    import hashlib

    text = generate(target, release)
    out = release.path / SBOM
    tmp = out.with_name(f".{SBOM}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    releases.record(release, sbom=SBOM, sbom_sha256=hashlib.sha256(text.encode()).hexdigest())
    return out
