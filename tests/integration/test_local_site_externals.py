"""The local site's Spack externals are what Debian actually installed."""
import re
import shutil
import subprocess

import pytest
import yaml

from iostack import paths

DEBIAN_PACKAGE = {
    "gcc": "gcc-12", "openmpi": "openmpi-bin", "cmake": "cmake", "ecbuild": "ecbuild",
    "eccodes": "libeccodes-dev", "eckit": "libeckit-dev", "metkit": "libmetkit-dev",
    "fdb": "libfdb5-dev",
}

pytestmark = pytest.mark.skipif(not shutil.which("dpkg-query"), reason="not a Debian system")


def externals():
    data = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "packages.yaml").read_text())
    for name, cfg in data["packages"].items():
        for ext in cfg.get("externals", []):
            yield name, re.match(r"[\w-]+@([\w.]+)", ext["spec"]).group(1), ext["prefix"]


@pytest.mark.parametrize("name,version,prefix", list(externals()))
def test_external_version_matches_dpkg(name, version, prefix):
    deb = DEBIAN_PACKAGE[name]
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", deb], capture_output=True, text=True)
    assert out.returncode == 0, f"{deb} is not installed"
    upstream = re.sub(r"^\d+:", "", out.stdout).split("-")[0].split("+")[0]
    assert upstream == version or upstream.startswith(version + ".")
    assert prefix == "/usr"


def test_every_debian_mapped_package_is_declared():
    assert {n for n, _, _ in externals()} == set(DEBIAN_PACKAGE)
