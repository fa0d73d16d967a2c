"""`bin/iostack site init` on this node, with the real Spack, dpkg and ReFrame: on a
Debian 12 node (CI's) it finds by itself what the `local` site's packages.yaml declares by
hand, and writes nothing with --dry-run. (tests/nightly/test_trixie_site.py makes a whole
site on Debian 13.)"""
import pytest
import yaml
from conftest import iostack

from iostack.core import paths
from iostack.offline import siteinit
from iostack.site import packages as syspkgs

LOCAL = paths.SPACK_ENV_SITES / "local" / "packages.yaml"


def is_bookworm() -> bool:
    return (syspkgs.OS_RELEASE.is_file()
            and syspkgs.os_release().get("VERSION_CODENAME") == "bookworm")


@pytest.fixture(scope="module")
def this_node(tmp_path_factory, timings):
    records = tmp_path_factory.mktemp("site-init")
    run = iostack("site", "init", "this-node", "--dry-run", "--record", records)
    timings["site init (this node, dry run)"] = run.seconds
    return run, siteinit.Findings.from_records("this-node", records)


def test_a_dry_run_shows_what_it_found_and_writes_nothing(this_node):
    run, _ = this_node
    assert run.returncode == 0, run.error_lines
    assert "--dry-run: would write" in run.stdout
    assert not (paths.REPO / "sites" / "this-node.yaml").exists()
    assert not (paths.SPACK_ENV_SITES / "this-node").exists()


@pytest.mark.skipif(not is_bookworm(), reason="local's externals are Debian 12's")
def test_it_finds_every_external_local_declares_by_hand(this_node):
    _, findings = this_node
    found, _ = siteinit.externals(findings)
    detected = {(e.package, e.entry["prefix"]): e.entry["spec"] for e in found}
    local = yaml.safe_load(LOCAL.read_text())["packages"]
    missing = []
    for package, entry in local.items():
        for external in (entry or {}).get("externals", []):
            name_version, *variants = external["spec"].split()[0].replace("+", " +").split()
            spec = detected.get((package, external["prefix"]))
            # Spack's version may be longer (ncurses 6.4 is 6.4.20221231); variants as set
            if spec is None or not spec.split()[0].startswith(name_version) or not \
                    set(variants) <= set(spec.split()[0].replace("+", " +").replace("~", " ~").split()):
                missing.append(f"{external['spec']} at {external['prefix']}: found {spec}")
    assert missing == []
    assert findings.spack["os"] == "debian12" and findings.spack["libc"] == "glibc@2.36"
