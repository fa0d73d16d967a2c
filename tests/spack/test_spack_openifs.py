"""OpenIFS 48r1.1.0 on the local site (its `nwp` environment), offline.

In CI: every source of the nwp environment is fetched from the offline source mirror, each
archive checked against the sha256 its recipe pins (`bin/iostack mirror create`: Spack's
fetch), and nothing comes from anywhere else; the environment concretizes to its committed
lock (tests/spack/test_spack_locks.py); the recipe's patch applies to the release's source. The full build of OpenIFS (an hour and more on two
cores) does not fit CI: the nightly tier builds it (tests/nightly/test_openifs_nwp.py)."""
import hashlib
import json
import pathlib
import re

import pytest
from conftest import fetched_urls, iostack

from iostack.core import paths
from iostack.spack import config as spack_config
from support import targets

NWP_LOCK = json.loads((paths.SPACK_ENV_SITES / "local" / "nwp" / "spack.lock").read_text())
#: the sources OpenIFS adds to the site's stack, as the mirror names them (archives by their
#: sha256, the git-pinned OpenIFS release by its commit)
OPENIFS_SOURCES = {
    "openifs": "git/ecmwf-ifs/openifs.git/6c93ad58cdb9711b088e7af3025a5b6de3780697.tar.gz",
    "ecmwf-atlas": "archive/48/48536742cec0bc268695240843ac0e232e2b5142d06b19365688d9ea44dbd9ba.tar.gz",
    "fckit": "archive/99/990623eb4eb999145f2d852da9fbd71a69e2e0be601c655c274e8382750dfda2.tar.gz",
    "multio": "archive/99/994c9060a606a04955bf61bfa88515a0a23298a7ac67d46cbb658f1d0244f9c6.tar.gz",
    "fcm": "archive/0c/0c291c652d6d2827a789cc326d9f2e3b2daa2a10aae7faa72d2fad3fd8a650c2.tar.gz",
}


def registered_source_mirror() -> pathlib.Path:
    text = spack_config.registered_mirrors_file(targets.settings().cache).read_text()
    urls = re.findall(r'url:\s*"?file://([^"\s]+)', text)
    return pathlib.Path(urls[0])


def test_the_nwp_lock_is_openifs_48r1_on_debian_eccodes():
    specs = {s["name"]: s for s in NWP_LOCK["concrete_specs"].values()}
    assert specs["openifs"]["version"] == "48r1.1.0"
    assert specs["openifs"]["parameters"]["commit"] == "6c93ad58cdb9711b088e7af3025a5b6de3780697"
    assert (specs["multio"]["version"], specs["ecmwf-atlas"]["version"]) == ("1.5.1", "0.34.0")
    assert specs["eccodes"]["version"] == "2.28.0" and specs["eccodes"].get("external")
    assert "boost" not in specs


@pytest.fixture(scope="module")
def nwp_mirror(tmp_path_factory, timings):
    root = tmp_path_factory.mktemp("nwp-sources")
    run = iostack("mirror", "create", "--site", "local", "--env", "nwp", "--root", root,
                  "-d", root / "mirror")
    timings["fetch every source of local/nwp (mirror create)"] = run.seconds
    return root / "mirror", run


def test_every_openifs_source_is_fetched_from_the_mirror_checksums_verified(nwp_mirror):
    mirror, run = nwp_mirror
    assert run.returncode == 0, run.error_lines
    source = registered_source_mirror()
    urls = fetched_urls(run.output)
    assert urls and all(u.replace("file:////", "file:///").startswith(source.as_uri())
                        for u in urls), urls
    for name, path in OPENIFS_SOURCES.items():
        got = mirror / "_source-cache" / path
        assert got.is_file(), name
        if path.startswith("archive/"):
            # Spack stored it under the sha256 it verified, which is the file's own
            assert hashlib.sha256(got.read_bytes()).hexdigest() == got.name.split(".")[0]
        assert got.read_bytes() == (source / "_source-cache" / path).read_bytes(), name


def test_the_recipe_patches_the_released_ifs_source_where_it_means_to(nwp_mirror):
    """Spack's filter_file changes nothing, silently, where its pattern matches nothing: the
    recipe's patch() as Spack runs it (`spack patch`) on the release's own ifs-source."""
    mirror, _ = nwp_mirror
    root = mirror.parent
    spack = ("spack", "--site", "local", "--env", "nwp", "--root", root, "--")
    # the lock's openifs, by its hash: `openifs` by name would be concretized afresh (two
    # solves of two CPU-minutes each in CI), and might not be the spec the lock builds
    (locked,) = [f"/{r['hash']}" for r in NWP_LOCK["roots"] if r["spec"] == "openifs"]
    run = iostack(*spack, "patch", locked)
    assert run.returncode == 0, run.error_lines
    assert f"Patched openifs in {root}" in run.output and locked[1:] in run.output
    where = iostack(*spack, "location", "--source-dir", locked)
    assert where.returncode == 0, where.error_lines
    text = (pathlib.Path(where.stdout.strip().splitlines()[-1]) / "ifs-source" /
            "CMakeLists.txt").read_text()
    assert text.count("\nif(NOT ECCODES_LIBRARIES)\n  set(ECCODES_LIBRARIES eccodes_f90 eccodes)\n") == 1
    assert text.count("\nif(HAVE_ATLAS AND NOT ATLAS_LIBRARIES)\n  set(ATLAS_LIBRARIES atlas_f)\n") == 1
    # both of ifs-source's branches (static, shared) now keep MultIO's FDB sink linked
    kept = "list(APPEND MULTIO_LIBRARIES -Wl,--push-state,--no-as-needed multio-fdb5 -Wl,--pop-state)"
    assert text.count(kept) == 2 and "list(APPEND MULTIO_LIBRARIES multio-fdb5)" not in text
