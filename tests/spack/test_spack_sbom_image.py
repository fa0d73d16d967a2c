"""A deployed release's SBOM and image, for real: the CycloneDX document deploy wrote,
checked with the CycloneDX library's own 1.6 schema validation and against what Spack and
dpkg say; the squashfs image, made twice to the same bytes, mounted without root where
the release was built for, and the nightly's smoke and FDB bit-identity checks run from it
in a mount namespace where the original tree is hidden, recording the image's sha256."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest
from conftest import IOSTACK, iostack

from iostack.deployment import image, releases, stack
from iostack.regression import results
from iostack.spack import runner
from iostack.site.target import SpackEnv
from support import targets

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"


def current_release(root: pathlib.Path) -> releases.Release:
    return releases.find(root, releases.current(root))


def spack_json(release: releases.Release, root: pathlib.Path, *args) -> list[dict]:
    """`spack find --json` in the release's own environment."""
    p = runner.spack(["-e", release.env_dir(), "find", "--json", *args],
                     targets.of(root, release=release.path), in_env=False, capture=True)
    return json.loads(p.stdout)


def dpkg_version(package: str) -> str:
    return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", f"{package}:amd64"],
                          capture_output=True, text=True).stdout or subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True).stdout


# --- SBOM ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sbom_doc(local_deploy):
    root, _ = local_deploy
    release = current_release(root)
    text = (release.path / release.meta["sbom"]).read_text()
    return root, release, text, json.loads(text)


def test_the_sbom_validates_against_cyclonedx_1_6_and_a_broken_one_does_not(sbom_doc):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    _, release, text, doc = sbom_doc
    assert release.meta["sbom"] == "sbom.cdx.json"
    assert hashlib.sha256(text.encode()).hexdigest() == release.meta["sbom_sha256"]
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    assert validator.validate_str(text) is None
    # the validator can fail: a component type the schema does not know
    broken = json.loads(text)
    broken["components"][0]["type"] = "spack-package"
    assert validator.validate_str(json.dumps(broken)) is not None


def test_the_sbom_has_every_installed_spec_and_every_external_of_the_release(sbom_doc):
    root, release, _, doc = sbom_doc
    lock = json.loads((release.path / "spack.lock").read_text())["concrete_specs"]
    externals = {h for h, s in lock.items() if s.get("external")}
    installed = {s["hash"] for s in spack_json(release, root) if not s.get("external")} - externals
    # every one Spack says is installed is in the lock and has its prefix under <root>/opt
    assert installed <= set(lock) and installed
    refs = [c["bom-ref"] for c in doc["components"]]
    assert len(refs) == len(installed) + len(externals)
    assert set(refs) == installed | externals
    # the release itself is the document's subject, depending on the lock's roots
    graph = {d["ref"]: set(d.get("dependsOn", [])) for d in doc["dependencies"]}
    subject = doc["metadata"]["component"]["bom-ref"]
    assert graph[subject] == {r["hash"] for r in json.loads(
        (release.path / "spack.lock").read_text())["roots"]}
    # each component's dependencies are its lock node's, as far as the release has them
    for h in installed | externals:
        deps = {d["hash"] for d in lock[h].get("dependencies", [])} & (installed | externals)
        assert graph.get(h, set()) == deps, lock[h]["name"]


def test_the_sbom_names_sources_licences_and_os_packages(sbom_doc):
    _, release, _, doc = sbom_doc
    by_name = {c["name"]: c for c in doc["components"]}
    props = {n: {p["name"]: p["value"] for p in c.get("properties", [])} for n, c in by_name.items()}
    # a source archive: its URL and the sha256 the recipe pins (the mirror stores it by it)
    eckit = by_name["eckit"]
    (source,) = [r for r in eckit["externalReferences"] if r["type"] == "source-distribution"]
    assert source["url"] == "https://github.com/ecmwf/eckit/archive/refs/tags/1.28.8.tar.gz"
    digest = source["hashes"][0]["content"]
    assert (source["hashes"][0]["alg"], digest) == (
        "SHA-256", "4bd4fbb971ec9b53a64d47f40336c130b37349850ae82114d5c04f393ea70d23")
    assert eckit["purl"].startswith("pkg:generic/eckit@1.28.8?checksum=sha256%3A" + digest) or \
        f"checksum=sha256:{digest}" in eckit["purl"].replace("%3A", ":")
    assert eckit["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    # a git source: its commit, also as the pedigree's
    io500 = by_name["io500"]
    assert {c["uid"] for c in io500["pedigree"]["commits"]} >= {
        "bb08c873af21fad889838c5a4470868cb1294653"}
    # metkit's resource (its configuration files, a PyPI wheel) is a source too
    assert any("metkitlib-1.13.1" in r["url"] for r in by_name["metkit"]["externalReferences"])
    # externals: marked, with the Debian package that provides them and its installed version
    for name, package in (("openmpi", "openmpi-bin"), ("cmake", "cmake"), ("glibc", "libc6")):
        assert props[name]["iostack:external"] == "true"
        assert props[name]["iostack:os-package"] == package
        version = dpkg_version(package)
        assert props[name]["iostack:os-package-version"] == version
        assert by_name[name]["purl"].startswith(f"pkg:deb/debian/{package}@")
    # built ones: their prefix in the deployment's install tree, no external mark
    assert props["fdb"]["iostack:prefix"].startswith(str(release.path.parents[1] / "opt"))
    assert "iostack:external" not in props["fdb"]


def test_sbom_command_prints_the_same_document_deploy_wrote(sbom_doc, tmp_path):
    root, release, text, _ = sbom_doc
    out = tmp_path / "again.cdx.json"
    p = iostack("sbom", "--root", root, release.id, "-o", out)
    assert p.returncode == 0, p.error_lines
    assert out.read_text() == text
    p = iostack("sbom", "--root", root, "no-such-release")
    assert p.returncode == 1 and len(p.error_lines) == 1 and "no release 'no-such-release'" in \
        p.error_lines[0] and "Traceback" not in p.output


# --- image ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def release_image(local_deploy, tmp_path_factory, timings):
    if not (shutil.which("mksquashfs") and shutil.which("squashfuse")):
        pytest.fail("squashfs-tools and squashfuse are needed (system-packages.toml, deploy)")
    root, _ = local_deploy
    release = current_release(root)
    twice = tmp_path_factory.mktemp("image")
    p = iostack("image", "--root", root, release.id)
    assert p.returncode == 0, p.error_lines
    timings["image of the local release"] = p.seconds
    first = image.default_path(root, release)
    again = iostack("image", "--root", root, release.id, "-o", twice / "again.squashfs")
    assert again.returncode == 0, again.error_lines
    return root, current_release(root), first, twice / "again.squashfs"


def test_the_image_is_reproducible_and_its_sha256_is_in_release_json(release_image, timings):
    root, release, first, again = release_image
    digests = [image.sha256(f) for f in (first, again)]
    timings["  image sha256 (made twice)"] = " = ".join(d[:16] for d in digests)
    timings["  image size (MiB)"] = f"{first.stat().st_size / 2**20:.0f}"
    assert digests[0] == digests[1]
    # the second made it too, so release.json names the second file, with the same sum
    assert release.meta["image_sha256"] == digests[0]


def image_listing(path: pathlib.Path) -> dict[str, tuple[str, str, str]]:
    """{path in the image: (mode, owner, UTC minute)}, symlinks as `path -> target`."""
    out = subprocess.run(["unsquashfs", "-lln", "-UTC", str(path)], capture_output=True,
                         text=True, check=True).stdout
    entries = {}
    for line in out.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("squashfs-root"):
            name = fields[5].removeprefix("squashfs-root") or "/"
            entries[name] = (fields[0], fields[1], f"{fields[3]} {fields[4]}")
    return entries


def test_the_image_holds_what_the_release_needs_and_nothing_else(release_image):
    root, release, first, _ = release_image
    entries = image_listing(first)
    paths = {name.split(" -> ")[0]: name for name in entries}
    tops = {p.split("/")[1] for p in paths if p != "/"}
    assert tops == {"opt", "releases", "current"}
    assert paths["/current"] == f"/current -> releases/{release.id}"
    prefixes = {p.split("/")[2] for p in paths if p.startswith("/opt/") and p.count("/") == 2}
    doc = json.loads((release.path / "sbom.cdx.json").read_text())
    installed = {pathlib.Path(p["value"]).name for c in doc["components"]
                 for p in c.get("properties", []) if p["name"] == "iostack:prefix"}
    assert prefixes - {"bin", ".spack-db"} == installed
    rel = f"/releases/{release.id}"
    held = {p.split("/")[3] for p in paths if p.startswith(rel + "/")}
    assert held == {"release.json", "spack.lock", "modulefiles", "lmod", "etc", "sbom.cdx.json",
                    "spack-env", "spack-user", "guide"}
    # what a user reads on a mounted image: the Spack scope and the guide (upstream.py, guide.py)
    assert {f"{rel}/spack-user/upstreams.yaml", f"{rel}/guide/index.html"} <= set(paths)
    # its Spack environment's files, not Spack's state in it
    assert f"{rel}/spack-env/sites/local/spack.yaml" in paths
    assert not [p for p in paths if "/.spack-env" in p]
    # Spack's install database: the release's installs, as the live one records them
    assert {p for p in paths if p.startswith("/opt/.")} == {"/opt/.spack-db",
                                                            "/opt/.spack-db/index.json"}
    inside = json.loads(subprocess.run(["unsquashfs", "-cat", str(first), "opt/.spack-db/index.json"],
                                       capture_output=True, check=True).stdout)["database"]
    live = json.loads((root / "opt" / ".spack-db" / "index.json").read_text())["database"]
    lock = json.loads((release.path / "spack.lock").read_text())["concrete_specs"]
    assert inside["version"] == live["version"]
    assert set(inside["installs"]) == set(lock) & set(live["installs"])
    assert all(inside["installs"][h] == live["installs"][h] for h in inside["installs"])
    assert {h for h, r in inside["installs"].items() if r["installed"] and not
            r["spec"].get("external")} >= {c["bom-ref"] for c in doc["components"]
                                            if any(p["name"] == "iostack:prefix"
                                                   for p in c.get("properties", []))}
    assert {p.split("/")[2] for p in paths if p.startswith("/releases/")} == {release.id}
    # every entry owned by root, every time the release's creation time (SOURCE_DATE_EPOCH)
    when = image.epoch(release)
    minute = time.strftime("%Y-%m-%d %H:%M", time.gmtime(when))
    assert {(owner, stamp) for _, owner, stamp in entries.values()} == {("0/0", minute)}
    fstime = subprocess.run(["unsquashfs", "-mkfs-time", str(first)], capture_output=True,
                            text=True, check=True).stdout.split()
    assert fstime == [str(when)]
    # the image's release.json is the release's as built: no verdict or image fields
    inside = json.loads(subprocess.run(["unsquashfs", "-cat", str(first),
                                        f"releases/{release.id}/release.json"],
                                       capture_output=True, check=True).stdout)
    assert inside["id"] == release.id and "regression" not in inside and "image_sha256" not in inside


def namespace(script: str, **env) -> subprocess.CompletedProcess:
    """`script` in a mount namespace of its own (private mounts): what it mounts is gone
    when it ends, and nothing outside sees it."""
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-euo",
                        "pipefail", "-c", script], capture_output=True, text=True, timeout=1800,
                       env={**os.environ, **{k: str(v) for k, v in env.items()}})
    print(p.stdout[-6000:], p.stderr[-4000:])
    return p


def hidden_top(root: pathlib.Path) -> pathlib.Path:
    """What the namespace covers with an empty tmpfs to hide the built tree: the root, or
    its first ancestor an unprivileged user cannot pass (pytest's 0700 temporary directory),
    so that the user can reach the mount point."""
    for parent in reversed(root.parents):
        if not os.stat(parent).st_mode & 0o001:
            return parent
    return root


def test_a_user_mounts_the_image_without_root_and_loads_its_modules(release_image):
    """squashfuse as an unprivileged user (fusermount3) at the deployment root, in a mount
    namespace where an empty tmpfs hides the tree the release was built in."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("fusermount3"):
        pytest.skip("needs root (to make the namespace and the user's mount point), unshare "
                    "and fusermount3 (apt: fuse3)")
    root, release, first, _ = release_image
    shelf = pathlib.Path(tempfile.mkdtemp(prefix="iostack-image-", dir="/var/tmp"))
    try:
        shelf.chmod(0o755)
        copy = shelf / first.name
        shutil.copy(first, copy)
        copy.chmod(0o644)
        # /dev/fuse is 0666 on a node (the privilege is in mount(2), which fusermount3
        # does); a container may give 0600: then the namespace gets a 0666 node of its own
        script = r"""
if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
  dev=$(mktemp -d); mount -t tmpfs devfuse "$dev"
  mknod -m 666 "$dev/fuse" c 10 229; mount --bind "$dev/fuse" /dev/fuse
fi
mount -t tmpfs -o mode=0755 hidden "$HIDE"
mkdir -p "$ROOT"
chown 65534:65534 "$ROOT"
setpriv --reuid=65534 --regid=65534 --clear-groups --reset-env bash -c '
  set -euo pipefail
  squashfuse "$0" "$1"
  grep " $1 " /proc/self/mountinfo | grep -o "fuse.squashfuse"
  ls "$1"
  source "$2"
  module use "$1/current/modulefiles/Core"
  module load openmpi fdb
  fdb-info --version
  command -v fdb-info
  id -u
  fusermount3 -u "$1"
' "$IMAGE" "$ROOT" "$LMOD_INIT"
"""
        p = namespace(script, ROOT=root, HIDE=hidden_top(root), IMAGE=copy, LMOD_INIT=LMOD_INIT)
    finally:
        shutil.rmtree(shelf)
    assert p.returncode == 0, p.stderr
    fdb = [p["value"] for c in json.loads((release.path / "sbom.cdx.json").read_text())["components"]
           for p in c.get("properties", []) if c["name"] == "fdb" and p["name"] == "iostack:prefix"]
    assert p.stdout.splitlines() == ["fuse.squashfuse", "current", "opt", "releases", "5.13.106",
                                     f"{fdb[0]}/bin/fdb-info", "65534"]


def test_the_nightly_runs_from_the_mounted_image_and_records_its_sha256(release_image, tmp_path,
                                                                        timings):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a mount namespace needs root and unshare")
    root, release, _, outside = release_image   # the root's own images/ is hidden too
    state = tmp_path / "state"
    script = r"""
mount -t tmpfs hidden "$ROOT"
# allow_other: root's bin/iostack runs the nightly as the service account
squashfuse -o allow_other "$IMAGE" "$ROOT"
trap 'umount "$ROOT"' EXIT
# the tree the release was built in is gone: no build stage, caches, other releases
ls -A "$ROOT" | tr '\n' ' '; echo
"$IOSTACK" nightly --site local --root "$ROOT" --image "$IMAGE" --state "$STATE" -- \
    -S valid_prog_environs=stack -n 'StackSmokeCheck|FdbBitIdentityCheck'
"""
    start = time.monotonic()
    p = namespace(script, ROOT=root, IMAGE=outside, STATE=state, IOSTACK=IOSTACK)
    timings["nightly smoke and FDB bit identity from the image"] = time.monotonic() - start
    assert p.stdout.splitlines()[0].split() == ["current", "opt", "releases"]
    assert p.returncode == 0, p.stderr[-3000:]
    # the session is stored in the state's results DB, with the release and the image named
    os.environ["RFM_SQLITE_DB_FILE"] = str(state / "results.db")
    try:
        (session,) = results.stored_sessions(targets.of(state, system="local"))
    finally:
        del os.environ["RFM_SQLITE_DB_FILE"]
    info = session["session_info"]
    assert info["image_sha256"] == release.meta["image_sha256"] == image.sha256(outside)
    assert info["release"] == release.id
    cases = {tc["name"].split()[0]: tc["result"] for run in session["runs"]
             for tc in run["testcases"]}
    assert set(cases) == {"StackSmokeCheck", "FdbBitIdentityCheck"}
    # a smoke case per root of the release's lock, Spack's `find` and `test run` on the
    # mounted image: the recipes with stand-alone tests passed them there
    smoked = {tc["name"].split("%package=")[1].split()[0]: tc for run in session["runs"][:1]
              for tc in run["testcases"] if tc["name"].startswith("StackSmokeCheck")}
    assert set(smoked) == {spec.key for spec in stack.root_specs(
        json.loads((release.path / "spack.lock").read_text()), stack.core_compilers(SpackEnv("local")))}
    tested = {key.split("@")[0] for key, tc in smoked.items() if tc.get("spack_test") == "passed"}
    assert {"netcdf-output-bench", "fdb-archive-bench", "nvme-stage"} <= tested
    failed = [tc["name"] for run in session["runs"][-1:] for tc in run["testcases"]
              if tc["result"] != "pass"]
    assert failed == []
    # the run wrote into STATE (the image is read-only)
    (report,) = [line.removeprefix("iostack: ReFrame report: ") for line in p.stdout.splitlines()
                 if line.startswith("iostack: ReFrame report: ")]
    assert pathlib.Path(report).parent == state / "reports"


def test_the_nightly_refuses_an_image_that_is_not_mounted(release_image, tmp_path):
    root, _, first, _ = release_image
    p = iostack("nightly", "--root", root, "--image", first, "--state", tmp_path / "s")
    assert p.returncode == 2 and len(p.error_lines) == 1
    assert "is not on a mounted squashfs image" in p.error_lines[0]
    assert "Traceback" not in p.output
