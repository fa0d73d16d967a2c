"""The local site's Spack externals are what Debian actually installed: each names the
package that provides it (`extra_attributes: {debian: ...}`), whose version dpkg reports and
whose files lie under the external's prefix."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from iostack.core import paths
from iostack.offline import setup
from iostack.regression import reframe
from iostack_rfm import config

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


def owner(path: str) -> str:
    """The Debian package dpkg says installed `path` (symlinks resolved, as dpkg lists files)."""
    real = os.path.realpath(path)
    out = subprocess.run(["dpkg-query", "-S", real], capture_output=True, text=True)
    assert out.returncode == 0, f"{real}: {out.stderr.strip()}"
    return out.stdout.split(":", 1)[0]


def test_what_iostack_runs_from_debian_is_in_packages_set_up_installs():
    """Beside the Spack externals (test_system_packages.py): Lmod's command, which ReFrame's
    modules system and the deployed module tree use, and Debian's FDB tools that the
    cross-version check runs from the `stack` environment's other_fdb_bin."""
    release = setup.debian_release(setup.os_release())
    installed_by_setup = set(setup.apt_packages(release, ("deploy",)))
    (stack,) = [e for e in config.site_configuration("local")["environments"]
                if e["name"] == "stack" and "local" in e["target_systems"]]
    check = (paths.REFRAME_DIR / "checks" / "fdb_cross_version.py").read_text()
    tools = sorted(set(re.findall(r"/(fdb-[a-z]+)\b", check)))
    assert tools, "the cross-version check names no FDB tool"
    programs = [reframe.LMOD_CMD_DEFAULTS[0]] + [f"{stack['extras']['other_fdb_bin']}/{t}"
                                                 for t in tools]
    owners = {program: owner(program) for program in programs}
    assert {p: o for p, o in owners.items() if o not in installed_by_setup} == {}
