"""The cray-ex model of the HPE Cray PE, as far as this machine proves it: Spack builds eckit,
with each of the site's two PrgEnvs, on a PE-shaped tree (tests/support/cray_pe.py) placed
where spack-env/sites/cray-ex/packages.yaml names it (/opt/cray/pe, in a private mount
namespace), and a user loads each build through Lmod and links a program to it with CC.

The environment is the site's own, with this machine's node facts (OS, libc and CPU:
debian12, glibc 2.36, x86_64_v3) in place of ARCHER2's, so that what is built runs here (and
the toolchains' pre-seed of that target, the zen2 one's values: one ABI), and this machine's
build tools (cmake, make, bison, flex, m4, pkgconf, ncurses) as externals, as the local site
takes them; every line of its Cray handling is unchanged: the compilers are
the drivers cc/CC/ftn with the modules EPCC's Spack loads [EPCC-Spack], cray-mpich and
cray-libsci are externals per compiler with their modules. The drivers refuse to compile
without a PrgEnv and a CPU target loaded, so a build that succeeds had Spack load them.

What it cannot prove: anything of CCE (both PrgEnvs compile with gcc here), of the real
craype (which libraries it adds, in which order, its -h and target options), of Cray MPICH
(the tree's is this machine's Open MPI) or of HPE's real modules (stand-ins do what ours
assume they do); nor that ARCHER2's SLES 15 or zen2 build the same. Those need the machine.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest
import yaml

from iostack.core import paths
from iostack.deployment import deploy
from iostack.site import facts as site_facts
from iostack.spack import runner
from iostack.site.target import SpackEnv
from support import targets
from support import cray_pe

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root for the mount namespace /opt/cray lives in")

SITE = "cray-ex"
FACTS = site_facts.load(SITE)
#: this machine instead of ARCHER2's nodes
HERE = {"os=sles15": "os=debian12", "target=zen2": "target=x86_64_v3",
        f"{FACTS.libc} ": "glibc@2.36 "}
#: the build tools this machine has, as the local site declares them
HOST_TOOLS = ("cmake", "gmake", "pkgconf", "bison", "flex", "m4", "ncurses")

USER_PROGRAM = r"""
#include <iostream>
#include "eckit/eckit_version.h"
int main() { std::cout << "eckit " << eckit_version_str() << std::endl; return 0; }
"""


def on_this_machine(env_dir: pathlib.Path) -> None:
    """The site's environment with this machine's OS, libc and CPU, and its build tools."""
    for name in ("packages.yaml", "spack.yaml"):
        text = (env_dir / name).read_text()
        for theirs, ours in HERE.items():
            text = text.replace(theirs, ours)
        (env_dir / name).write_text(text)
    local = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "packages.yaml").read_text())
    packages = yaml.safe_load((env_dir / "packages.yaml").read_text())
    for tool in HOST_TOOLS:
        entry = local["packages"][tool]
        packages["packages"][tool] = {
            "buildable": False,
            "externals": [{"spec": f"{e['spec']} os=debian12 target=x86_64_v3",
                           "prefix": e["prefix"]} for e in entry["externals"]]}
    (env_dir / "packages.yaml").write_text(yaml.safe_dump(packages, sort_keys=False))


def in_namespace(pe_root: pathlib.Path, argv: list[str], env: dict, timeout: int):
    """argv with `pe_root` at /opt/cray (a private mount namespace: the host is untouched)."""
    setup = ("mount -t tmpfs -o mode=0755 iostack-pe /opt && mkdir -p /opt/cray && "
             f"mount --bind {pe_root} /opt/cray && exec \"$@\"")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "bash", "-c",
                           setup, "iostack-pe", *argv], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_spack_builds_eckit_with_both_prgenvs_and_a_user_links_to_each(tmp_path, timings):
    pe_root = tmp_path / "cray"
    pe = cray_pe.write(pe_root / "pe", SITE)
    root = tmp_path / "root"
    env_dir = runner.deployed_env(SpackEnv(SITE), root)
    on_this_machine(env_dir)
    log = tmp_path / "drivers.log"
    # the toolchain files, with the pre-seed of this machine's target: the x86-64 psABI and
    # glibc fix every value, as for zen2 (toolchains/README.md)
    toolchains = tmp_path / "toolchains"
    shutil.copytree(paths.REPO / "packages" / "spack_repo" / "iostack" / "toolchains", toolchains)
    shutil.copy(toolchains / "preseed" / f"cray-ex-{FACTS.target}.cmake",
                toolchains / "preseed" / "cray-ex-x86_64_v3.cmake")
    env = {**cray_pe.clean_environment(MODULEPATH=str(pe.core), MODULESHOME="/usr/share/lmod/lmod",
                                       IOSTACK_FAKE_PE_LOG=str(log),
                                       IOSTACK_TOOLCHAINS=str(toolchains)),
           **{k: str(v) for k, v in runner.environment(targets.settings(), root).items()}}
    spack = str(runner.spack_bin(targets.settings()))

    start = time.monotonic()
    p = in_namespace(pe_root, [spack, "-e", str(env_dir), "offsite", "concretize", "--fresh",
                               "--force"], env, 3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    timings["cray-ex on a PE-shaped tree: concretize"] = time.monotonic() - start
    lock = json.loads((env_dir / "spack.lock").read_text())
    roots = {lock["concrete_specs"][r["hash"]]["parameters"]["craype"]: r["hash"]
             for r in lock["roots"] if r["spec"].startswith("eckit")}
    assert set(roots) == {"cce", "gnu"}, roots

    start = time.monotonic()
    p = in_namespace(pe_root, [spack, "-e", str(env_dir), "install", "-j2", "--fail-fast",
                               *(f"/{h}" for h in roots.values())], env, 4 * 3600)
    print(p.stdout[-6000:], p.stderr[-3000:])
    assert p.returncode == 0
    timings["cray-ex on a PE-shaped tree: eckit with both PrgEnvs"] = time.monotonic() - start

    # every compile went through the drivers with the builds' PrgEnv, target and MPI loaded
    calls = [line.split("\t") for line in log.read_text().splitlines()]
    by_env = {(c[1], c[3]) for c in calls if any(a.endswith(".cc") for a in c[4:])}
    assert by_env == {("GNU", "/opt/cray/pe/mpich/8.1.27/ofi/gnu/9.1"),
                      ("CRAY", "/opt/cray/pe/mpich/8.1.27/ofi/crayclang/14.0")}, by_env
    assert {c[2] for c in calls} == {"x86-rome"}

    # the release's module tree, as deploy makes it, and a user of each PrgEnv
    p = in_namespace(pe_root, [spack, "-e", str(env_dir), "module", "lmod", "refresh", "-y",
                               "--delete-tree"], env, 1200)
    assert p.returncode == 0, p.stderr[-3000:]
    deploy.install_meta_modules(root)
    (tmp_path / "user.cc").write_text(USER_PROGRAM)
    release = FACTS.programming_environment["release"]
    eckit = next(s for s in lock["concrete_specs"].values() if s["name"] == "eckit")["version"]
    user_env = cray_pe.clean_environment(MODULEPATH=str(pe.core))
    seen = {}
    for prgenv in ("PrgEnv-gnu", "PrgEnv-cray"):
        script = (f"module use {root}/modulefiles/Core && module load cpe/{release} {prgenv} "
                  f"craype-x86-rome iostack eckit && cd {tmp_path} && "
                  "lib=$(ls -d $ECKIT_ROOT/lib $ECKIT_ROOT/lib64 2>/dev/null | head -1) && "
                  f"CC -o user-{prgenv} user.cc -I$ECKIT_ROOT/include -L$lib -leckit "
                  f"-Wl,-rpath,$lib && ./user-{prgenv} && echo ECKIT_ROOT=$ECKIT_ROOT")
        p = in_namespace(pe_root, ["bash", "--noprofile", "--norc", "-c",
                                   ". /usr/share/lmod/lmod/init/bash && " + script],
                         user_env, 600)
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"eckit {eckit}" in p.stdout, p.stdout
        seen[prgenv] = re.search(r"ECKIT_ROOT=(\S+)", p.stdout).group(1)
    # each PrgEnv gets its own build: Lmod's compiler levels
    assert seen["PrgEnv-gnu"] != seen["PrgEnv-cray"]
    assert roots["gnu"][:7] in seen["PrgEnv-gnu"] and roots["cce"][:7] in seen["PrgEnv-cray"]
