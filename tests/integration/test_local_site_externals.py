"""The local site's Spack externals are what Debian actually installed: each names the
package that provides it (`extra_attributes: {debian: ...}`), whose version dpkg reports and
whose files lie under the external's prefix."""
import re
import shutil
import subprocess

import pytest
import yaml

from iostack.core import paths

pytestmark = pytest.mark.skipif(not shutil.which("dpkg-query"), reason="not a Debian system")


def externals():
    data = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "packages.yaml").read_text())
    for name, cfg in data["packages"].items():
        for ext in cfg.get("externals", []):
            version = re.match(r"[\w-]+@([\w.]+)", ext["spec"]).group(1)
            yield name, version, ext["prefix"], (ext.get("extra_attributes") or {}).get("debian")


@pytest.mark.parametrize("name,version,prefix,deb", list(externals()))
def test_external_version_matches_dpkg(name, version, prefix, deb):
    assert deb, f"{name}: external without extra_attributes.debian"
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", deb], capture_output=True, text=True)
    assert out.returncode == 0, f"{deb} is not installed"
    # Debian's version: [epoch:]upstream[-revision]; a repackaged older release is spelled
    # <newer>+really<older> (netCDF-Fortran 4.6.0+really4.5.4), whose sources are <older>
    upstream = re.sub(r"^\d+:", "", out.stdout).split("-")[0]
    upstream = upstream.split("+really")[-1].split("+")[0]
    assert upstream == version or upstream.startswith(version + ".")
    files = subprocess.run(["dpkg-query", "-L", deb], capture_output=True, text=True).stdout.split()
    assert any(f.startswith(prefix.rstrip("/") + "/") for f in files), f"{deb} has no file under {prefix}"


def test_every_external_is_a_debian_package_set_up_installs():
    """On a fresh node, an external whose package set-up does not install makes Spack build
    it from a source the mirror does not have."""
    listed = set((paths.REPO / "apt-packages.txt").read_text().split())
    assert {deb for *_, deb in externals()} - listed == set()
