"""Offline set-up, source mirrors, signed build caches and bundles, for real, with the
`local` deployment the tier built from source; and bad input, each refused with one line
and nothing half-installed."""
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tarfile

import pytest
from conftest import (
    LOCAL_BUILT,
    built_from_source,
    fetched_urls,
    installed_from_cache,
    installed_prefixes,
    iostack,
    register_source_mirror,
    shared_bundle,
)

from support.debian_root import REPO_IN_ROOT

from iostack.core import openpgp, paths, pins
from iostack.offline import bundle
from iostack.spack import config
from support import account, forge, targets

# metkit's configuration files, from ECMWF's metkitlib wheel on PyPI (see its recipe)
METKIT_CONFIGS_SHA256 = "e1a14a8b1d43c1b64b04528d5660dd3ad48127a9e136e76ae30d79859cfc99b1"
# builtin compiler-wrapper's cc.sh (spack-packages v2025.11.0)
COMPILER_WRAPPER_SHA256 = "a5ff4fcdbeda284a7993b87f294b6338434cffc84ced31e4d04008ed5ea389bf"


def archive_digests(mirror: pathlib.Path) -> set[str]:
    """The sha256 of each archive a Spack mirror stores by content (its name, without the
    extension Spack gives some), not the readable links to them."""
    return {p.name.split(".")[0] for p in (mirror / "_source-cache" / "archive").rglob("*")
            if p.is_file() and not p.is_symlink()}


# Spack's own answer: the sha256 of every source a spec of the deployed environment is
# fetched from (its archive, its resources), externals excluded; git-pinned ones have none.
LOCK_DIGESTS = """
import spack.environment as ev
specs = {s.dag_hash(): s for _, root in ev.active_environment().concretized_specs()
         for s in root.traverse()}
for s in specs.values():
    if s.external:
        continue
    pkg = s.package
    for fetcher in [pkg.fetcher] + [r.fetcher for r in pkg._get_needed_resources()]:
        if getattr(fetcher, "digest", None):
            print("digest", fetcher.digest)
"""


def lock_sources(root, tmp_path) -> set[str]:
    """The sha256 of each checksummed source the deployed lock builds from."""
    # a script file: `spack python -c` compiles its code as one interactive statement
    script = tmp_path / "lock_digests.py"
    script.write_text(LOCK_DIGESTS)
    p = iostack("spack", "--site", "local", "--root", root, "--", "python", script)
    assert p.returncode == 0, p.error_lines
    return {line.split()[1] for line in p.output.splitlines() if line.startswith("digest ")}


# --- set-up from an offline bundle ------------------------------------------------------

def make_bundle_copy(tmp_path) -> pathlib.Path:
    copy = tmp_path / "bundle"
    shutil.copytree(shared_bundle(), copy)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return copy


def test_setup_refuses_a_bundle_whose_sums_do_not_match(tmp_path, scratch_cache):
    env, cache = scratch_cache
    for link in ("spack", "spack-packages"):
        (cache / link).unlink()
    shutil.rmtree(cache / "accounts", ignore_errors=True)   # the index's link (scratch_cache)
    (cache / "spack-misc").unlink(missing_ok=True)
    copy = make_bundle_copy(tmp_path)
    archive = copy / pins.SPACK["archive"]
    data = bytearray(archive.read_bytes())
    data[-100] ^= 0x01
    archive.write_bytes(bytes(data))
    p = iostack("setup", "--skip-apt", "--spack-bundle", copy, env=env)
    assert p.returncode != 0
    assert p.error_lines == [f"iostack: error: {archive} does not match its sha256 in SHA256SUMS: "
                             "the bundle is damaged or was tampered with"]
    # refused before anything changed: no Spack unpacked, no mirror registered
    assert sorted(x.name for x in cache.iterdir()) == []


def test_setup_refuses_a_file_the_sums_do_not_cover(tmp_path, scratch_cache):
    env, cache = scratch_cache
    copy = make_bundle_copy(tmp_path)
    extra = copy / "mirror" / "_source-cache" / "archive" / "00" / "planted.tar.gz"
    extra.parent.mkdir()
    extra.write_bytes(b"not from the bundle's maker")
    p = iostack("setup", "--skip-apt", "--spack-bundle", copy, env=env)
    assert p.returncode != 0
    assert len(p.error_lines) == 1 and "is not covered by SHA256SUMS" in p.error_lines[0]


def test_setup_from_the_bundle_unpacks_the_pinned_spack_and_registers_its_mirror(tmp_path):
    cache = account.for_root(tmp_path) / "cache"     # root's, as /var/cache/iostack is
    p = iostack("setup", "--skip-apt", "--spack-bundle", shared_bundle(),
                env={"IOSTACK_CACHE": str(cache), "SPACK_ROOT": "", "IOSTACK_SPACK_PACKAGES": ""})
    assert p.returncode == 0, p.error_lines
    for tree, pin in (("spack", pins.SPACK), ("spack-packages", pins.SPACK_PACKAGES)):
        assert bundle.installed_commit(cache / tree) == pin["commit"]
        assert not (cache / f"{tree}.partial").exists()
    assert (cache / "spack" / "bin" / "spack").is_file()
    registered = config.registered_mirrors_file(cache).read_text()
    assert "mirrors::" in registered and (cache / "mirrors" / "source").as_uri() in registered
    registered = archive_digests(cache / "mirrors" / "source")
    # the bundle's sources, and what local's recipes take from elsewhere: metkit's configs
    # (PyPI) and the compiler wrapper (a file of spack-packages)
    assert registered - archive_digests(shared_bundle() / "mirror") == {
        METKIT_CONFIGS_SHA256, COMPILER_WRAPPER_SHA256}
    # a second set-up finds everything in place and changes nothing
    p = iostack("setup", "--skip-apt", "--spack-bundle", shared_bundle(),
                env={"IOSTACK_CACHE": str(cache), "SPACK_ROOT": "", "IOSTACK_SPACK_PACKAGES": ""})
    assert p.returncode == 0 and "is already v1.1.0" in p.stdout


# --- bad mirrors: refused before anything is installed -----------------------------------

IOR_ARCHIVE = "cb17f6b0d17fb98dae28abaa116fd3adde411f52d45ff9efb125efc791b97463.tar.gz"
IO500_COMMIT = "bb08c873af21fad889838c5a4470868cb1294653"


def broken_mirror(tmp_path, damage, name=IOR_ARCHIVE) -> pathlib.Path:
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_bundle() / "mirror", mirror)
    for p in mirror.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    damage(next(mirror.rglob(name)))
    return mirror


def tamper(path: pathlib.Path):
    data = bytearray(path.read_bytes())
    data[1000] ^= 0x01
    path.write_bytes(bytes(data))


def swap_under_the_same_commit(path: pathlib.Path):
    """The commit's tarball, rebuilt with one line added to its Makefile: a sound archive
    under the same name, which Spack, with no checksum for a git source, would take."""
    forged = path.with_name("forged.tar.gz")
    forge.forge_member(path, forged, "io500/Makefile", b"\n# and something of the attacker's\n")
    forged.rename(path)


@pytest.mark.parametrize("damage,name,message", [
    (pathlib.Path.unlink, IOR_ARCHIVE, "the source of ior-4.0.0 is in none of the configured mirrors"),
    (tamper, IOR_ARCHIVE, "the source archive of ior-4.0.0 (file://"),
    (swap_under_the_same_commit, f"{IO500_COMMIT}.tar.gz",
     f"io500: the source of commit {IO500_COMMIT[:12]} from file://"),
], ids=["missing-source", "tampered-archive", "git-source-swapped-under-its-commit"])
def test_deploy_refuses_a_bad_mirror_before_installing_anything(tmp_path, scratch_cache,
                                                                 damage, name, message):
    env, cache = scratch_cache
    register_source_mirror(cache, broken_mirror(tmp_path, damage, name))
    root = tmp_path / "root"
    p = iostack("deploy", "--site", "local", "--root", root, "--skip-regression", env=env)
    assert p.returncode != 0
    assert len(p.error_lines) == 1
    assert p.error_lines[0].startswith("iostack: error: fetching the sources of local "
                                       f"failed: {message}")
    if damage is tamper:
        assert "fails its sha256 checksum" in p.error_lines[0]
    if damage is swap_under_the_same_commit:
        assert p.error_lines[0].endswith("is not that commit's: its content sha256 is "
                                         f"{p.error_lines[0].split('content sha256 is ')[1][:64]}, "
                                         "the recipe records 912d813f1838d7d1c3f29f798c227f714604a"
                                         "911930eb41d4aa5de1b9850727b")
    assert "Traceback" not in p.output
    assert installed_prefixes(root) == []


# --- source mirror for a site ------------------------------------------------------------

def test_mirror_create_writes_exactly_the_sources_the_lock_builds(tmp_path, local_deploy):
    """../shared/spack/mirror stands in for the network: the new mirror holds what the lock
    builds from, checksums verified on the way."""
    root, _ = local_deploy
    dest = tmp_path / "site-mirror"
    p = iostack("mirror", "create", "--site", "local", "--root", root, "-d", dest)
    assert p.returncode == 0, p.error_lines
    # every checksummed source of the local lock (ecbuild, eckit, metkit, fdb, multio, ior,
    # metkit's configs), nothing else: not the other versions ../shared/spack holds
    wanted = lock_sources(root, tmp_path)
    assert METKIT_CONFIGS_SHA256 in wanted and len(wanted) >= 7
    assert archive_digests(dest) == wanted
    git = sorted(str(x.relative_to(dest / "_source-cache" / "git"))
                 for x in (dest / "_source-cache" / "git").rglob("*.tar.gz"))
    assert any(g.startswith("IO500/io500.git/bb08c873") for g in git)
    assert any(g.startswith("VI4IO/pfind.git/778dca8") for g in git)


# --- signed build cache ------------------------------------------------------------------

def test_deploy_from_the_buildcache_builds_nothing(short_root, local_deploy, local_buildcache,
                                                   timings):
    source_root, cold = local_deploy
    root = short_root
    p = iostack("deploy", "--site", "local", "--root", root, "--skip-regression",
                "--buildcache", local_buildcache)
    assert p.returncode == 0, p.error_lines
    assert built_from_source(p.output) == set()
    # a binary needs none of its build-only dependencies (Spack installs none of them)
    build_only = {"ecbuild", "compiler-wrapper"}
    assert installed_from_cache(p.output) == LOCAL_BUILT - build_only
    assert installed_prefixes(root) == [
        n for n in installed_prefixes(source_root) if not n.startswith(tuple(f"{b}-" for b in build_only))]
    # the lock fixes every spec: nothing is concretized again
    assert "==> No new specs to concretize." in p.stdout
    timings["deploy local from the build cache"] = p.seconds
    timings["  cold / from-cache ratio"] = f"{cold.seconds / p.seconds:.1f}"
    # where each deploy's time went, phase by phase (wall s / CPU s of iostack and Spack)
    for what, deployed in (("cold", source_root), ("from cache", root)):
        release = max((deployed / "releases").glob("2*"))
        phases = json.loads((release / "release.json").read_text())["build_phases"]
        for phase, spent in phases.items():
            timings[f"  {what}: {phase} (wall / CPU s)"] = f"{spent['wall_s']:.1f} / {spent['cpu_s']:.1f}"
    # a warm deploy (everything installed) only re-checks and regenerates the modules
    p = iostack("deploy", "--site", "local", "--root", root, "--skip-regression",
                "--buildcache", local_buildcache)
    assert p.returncode == 0 and built_from_source(p.output) == set()
    timings["deploy local, warm (all installed)"] = p.seconds


def test_deploy_from_the_buildcache_refuses_a_lock_that_leaves_specs_to_concretize(
        tmp_path, short_root, local_buildcache):
    """A spec of spack.yaml the lock does not fix would be concretized anew, and what it
    concretizes to may be in no cache: refused in one line, nothing installed."""
    # root runs it: root's, as a checkout is, and so is the directory it is in
    repo = account.for_root(account.for_root(tmp_path) / "repo")
    files = subprocess.run(["git", "-C", str(paths.REPO), "ls-files", "-z"], capture_output=True,
                           text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (paths.REPO / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(paths.REPO / name, repo / name)
    manifest = repo / "spack-env" / "sites" / "local" / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("  - nvme-stage\n", "  - nvme-stage\n  - ecbuild\n"))
    p = subprocess.run([str(repo / "bin" / "iostack"), "deploy", "--site", "local", "--root",
                        str(short_root), "--skip-regression", "--buildcache", str(local_buildcache)],
                       capture_output=True, text=True, timeout=1800,
                       env={**os.environ, "IOSTACK_VENV": str(targets.settings().venv)})
    print(p.stdout[-3000:], p.stderr[-3000:])
    errors = [line for line in p.stderr.splitlines() if line.startswith("iostack: error:")]
    assert p.returncode == 1 and errors == [
        "iostack: error: local's spack.lock does not fix every spec of its spack.yaml, so "
        "Spack would concretize again; a deploy from a build cache installs the lock as it "
        "is: `bin/iostack lock --update local`, commit, build and push again"]
    # refused before Spack's solve (deploy.names_the_lock_leaves_open): a concretize would
    # have written ecbuild into the deployment's copy of the lock
    deployed = short_root / "spack-env" / "sites" / "local" / "spack.lock"
    assert not deployed.exists() or "ecbuild" not in {
        r["spec"].split()[0] for r in json.loads(deployed.read_text())["roots"]}
    assert "Traceback" not in p.stderr and installed_prefixes(short_root) == []


def test_deploy_refuses_a_buildcache_signed_with_an_unknown_key(tmp_path, scratch_cache,
                                                                local_buildcache):
    env, cache = scratch_cache   # a node whose key ring does not hold the cache's key
    register_source_mirror(cache, shared_bundle() / "mirror")
    root = tmp_path / "root"
    p = iostack("deploy", "--site", "local", "--root", root, "--skip-regression",
                "--buildcache", local_buildcache, env=env)
    assert p.returncode != 0
    assert len(p.error_lines) == 1
    assert "signed with a key this node does not trust" in p.error_lines[0]
    assert "Traceback" not in p.output
    assert installed_prefixes(root) == []


# --- the air-gapped bundle ---------------------------------------------------------------

@pytest.fixture(scope="module")
def local_bundle(tmp_path_factory, local_deploy, local_buildcache, timings):
    root, _ = local_deploy
    out = tmp_path_factory.mktemp("bundle") / "iostack-local.tar"
    p = iostack("bundle", "--site", "local", "--root", root, "-o", out,
                "--buildcache", local_buildcache)
    assert p.returncode == 0, p.error_lines
    timings["bundle local"] = p.seconds
    timings["  bundle size (MiB)"] = f"{out.stat().st_size / 2**20:.0f}"
    return out


def test_bundle_holds_the_repository_spack_mirror_buildcache_and_sums(local_bundle):
    with tarfile.open(local_bundle) as tar:
        names = tar.getnames()
    top = "iostack-bundle-local"
    assert {f"{top}/SHA256SUMS", f"{top}/SHA256SUMS.asc", f"{top}/release-key.asc",
            f"{top}/{pins.SPACK['archive']}",
            f"{top}/{pins.SPACK_PACKAGES['archive']}", f"{top}/iostack/bin/iostack",
            f"{top}/iostack/pins.json"} <= set(names)
    for part in ("mirror/", "buildcache/", "wheels/", "samples/", "sbom/"):
        assert any(n.startswith(f"{top}/{part}") for n in names), part
    # built wheels only: an sdist would need its build requirements on the air-gapped node;
    # exactly the lock's files: one per locked package, each with a sha256 the lock records
    python = [n for n in names if n.startswith(f"{top}/wheels/")]
    assert python and all(n.endswith(".whl") for n in python), python
    lock = {}
    for line in (paths.REPO / "requirements.txt").read_text().replace("\\\n", " ").splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            pkg, rest = line.split("==", 1)
            lock[pkg.strip().lower().replace("-", "_")] = (rest.split()[0],
                                                          set(re.findall(r"[0-9a-f]{64}", rest)))
    with tarfile.open(local_bundle) as tar:
        carried = {}
        for n in python:
            name, version = pathlib.Path(n).name.split("-")[:2]
            digest = hashlib.sha256(tar.extractfile(n).read()).hexdigest()
            carried[name.lower()] = (version, digest)
    assert set(carried) == set(lock)
    for name, (version, digest) in carried.items():
        assert version == lock[name][0] and digest in lock[name][1], name
    commit = subprocess.run(["git", "-C", str(paths.REPO), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with tarfile.open(local_bundle) as tar:
        spack_archive = tar.extractfile(f"{top}/{pins.SPACK['archive']}")
        with tarfile.open(fileobj=spack_archive) as inner:
            assert inner.pax_headers.get("comment") == pins.SPACK["commit"]
    assert commit


def test_bundle_carries_the_sbom_of_the_current_release(local_bundle, local_deploy):
    root, _ = local_deploy
    current = (root / "current").resolve()
    with tarfile.open(local_bundle) as tar:
        carried = tar.extractfile(f"iostack-bundle-local/sbom/{current.name}.cdx.json").read()
        sums = tar.extractfile("iostack-bundle-local/SHA256SUMS").read().decode()
    assert carried == (current / "sbom.cdx.json").read_bytes()
    # covered by the bundle's sums, so set-up refuses a changed one
    assert f"  ./sbom/{current.name}.cdx.json" in sums


NO_NETWORK_SCRIPT = r"""
set -eu
# the network devices this node sees (its own network namespace: /proc/net is per namespace)
echo "links: $(awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' /proc/net/dev | tr '\n' ' ')"
# README's commands, as printed: set-up by the admin's own checkout (the bundle's copy of
# iostack never checks the bundle it came in), with the release key the admin holds; then
# deploy (its regression is mode deploy, which a node set up for deploying runs)
cd %(repo)s
bin/iostack setup --spack-bundle /srv/bundle --keyring /srv/release-key.asc
bin/iostack deploy
bin/iostack releases
"""


def test_a_fresh_node_sets_up_deploys_and_validates_the_bundle_with_no_network(
        tmp_path, fresh_bookworm_node, local_bundle, timings):
    """The fresh Debian 12 node of the integration tier (its system packages installed from
    the network, nothing else), now without any network: the bundle alone sets it up,
    deploys local from its build cache (the README's `bin/iostack deploy`, nothing added)
    and passes its regression, which makes the release current."""
    root, setup_run = fresh_bookworm_node
    assert setup_run.returncode == 0, setup_run.output[-3000:]
    with tarfile.open(local_bundle) as tar:
        tar.extractall(tmp_path)
    top = tmp_path / "iostack-bundle-local"
    # the release key, as the admin holds it: exported from the ring that signed the bundle
    listing = subprocess.run(["gpg", "--with-colons", "--import-options", "show-only", "--import",
                              str(top / bundle.SIGNER_KEY)], capture_output=True, text=True).stdout
    signer = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr"))
    (tmp_path / "key").mkdir()
    (tmp_path / "key" / "release-key.asc").write_bytes(
        openpgp.export(signer, account.key_ring(targets.settings())))
    root.bind(top, "/srv/bundle")
    root.bind(tmp_path / "key" / "release-key.asc", "/srv/release-key.asc", read_only=True)
    import time

    start = time.monotonic()
    try:
        p = root.run(["bash", "-c", NO_NETWORK_SCRIPT % {"repo": REPO_IN_ROOT}], net=False,
                     env={"HOME": "/srv/home"}, cwd="/")
    finally:
        del root.binds[-2:]
    timings["fresh node, no network: bundle set-up + deploy (mode deploy)"] = time.monotonic() - start
    print(p.stdout[-8000:], p.stderr[-4000:])
    assert p.returncode == 0, p.output[-6000:]
    # only loopback existed, so nothing could reach outside; and Spack fetched only from
    # the bundle's mirrors (now in root's cache on the node, which its service account reads)
    links = next(line for line in p.stdout.splitlines() if line.startswith("links: "))
    assert links.split()[1:] == ["lo"]
    urls = fetched_urls(p.output)
    assert urls and all(u.replace("file:////", "file:///").startswith("file:///var/cache/iostack/")
                        for u in urls), urls
    assert built_from_source(p.output) == set()
    assert "iostack: error" not in p.stderr
    (current,) = [line for line in p.stdout.splitlines() if line.startswith("*")]
    assert current.split()[-2:] == ["passed", "current"], p.stdout[-2000:]
    assert root.daemons() == []
