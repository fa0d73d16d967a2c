"""With real Spack: recipe variants no lock holds concretize where they are meant to build,
for the cluster's OS, compilers and libc (through `spack offsite`, spack-ext/spack-iostack, as
`bin/iostack lock` does); OpenFOAM refuses CCE; and a second gcc on a Cray system does not
break concretization."""
import os
import pathlib
import re
import subprocess

import pytest

from iostack.site import facts
from iostack.spack import runner
from iostack.site.target import SpackEnv
from support import targets

def spack_spec(env_dir: pathlib.Path, root: pathlib.Path, spec: str):
    env = {**os.environ, **{k: str(v) for k, v in runner.environment(targets.settings(), root).items()}}
    p = subprocess.run([str(pathlib.Path(env["SPACK_ROOT"]) / "bin" / "spack"), "-e", str(env_dir),
                        "offsite", "spec", "-I", *spec.split()],
                       capture_output=True, text=True, timeout=1200, env=env)
    print(p.stdout[-5000:], p.stderr[-3000:])
    return p


def site_spec(site, spec, tmp_path):
    return spack_spec(runner.deployed_env(SpackEnv.parse(site), tmp_path), tmp_path, spec)


# (site, spec): variants of our recipes that no site's lock holds (what the locks hold, the
# lock freshness and lock content tests cover: tests/spack/test_spack_locks.py,
# tests/unit/test_site_locks.py).
SPECS = [
    ("cray-ex", "openifs@48r1.1.0 precision=double craype=gnu os=sles15 target=zen2 %prgenv-gnu"),
]


@pytest.mark.parametrize("site,spec", SPECS, ids=[f"{s}:{p.split()[0]}" for s, p in SPECS])
def test_spec_concretizes(site, spec, tmp_path):
    p = site_spec(site, spec, tmp_path)
    assert p.returncode == 0
    # the root as asked: its name, and its version when the spec gives one
    asked = spec.split()[0]
    assert re.search(rf"^[-+e\[\] ]*{re.escape(asked)}(?![\w.-])", p.stdout, re.M), p.stdout
    if site != "local":
        # what a build on the cluster's nodes gets: its compilers' wrapper and its libc
        assert "^compiler-wrapper@" in p.stdout
        assert f"^{facts.load(site).libc} " in p.stdout


def test_openfoam_with_cce_is_refused_with_a_pointer_to_prgenv_gnu(tmp_path):
    p = site_spec("cray-ex", "openfoam os=sles15 target=zen2 %prgenv-cray", tmp_path)
    assert p.returncode != 0
    assert "PrgEnv-gnu" in p.stdout + p.stderr


def test_a_second_gcc_module_does_not_change_the_gnu_stack(tmp_path):
    """Cray systems have several gcc modules: the externals name theirs by version."""
    env_dir = runner.deployed_env(SpackEnv("cray-ex"), tmp_path)
    packages = env_dir / "packages.yaml"
    second_gcc = """    - spec: gcc@12.2.0 languages:='c,c++,fortran' os=sles15 target=zen2
      prefix: /opt/cray/pe/gcc/12.2.0
      modules: [cpe/23.09, PrgEnv-gnu, gcc/12.2.0, craype-x86-rome]
      extra_attributes:
        compilers:
          c: /opt/cray/pe/craype/2.7.23/bin/cc
          cxx: /opt/cray/pe/craype/2.7.23/bin/CC
          fortran: /opt/cray/pe/craype/2.7.23/bin/ftn
"""
    text = packages.read_text()
    anchor = "  gcc:\n    buildable: false\n    externals:\n"
    assert anchor in text
    packages.write_text(text.replace(anchor, anchor + second_gcc))
    p = spack_spec(env_dir, tmp_path, "ior os=sles15 target=zen2 %prgenv-gnu")
    assert p.returncode == 0
    nodes = {}
    for line in p.stdout.splitlines():
        m = re.search(r"(?:^|\s)\^?([a-z0-9-]+)@", line)
        if m:
            nodes.setdefault(m.group(1), line)
    # IOR and the MPI it links are gcc 11.2.0's (build-only tools may use either gcc)
    assert nodes["ior"].rstrip().endswith("%c=gcc@11.2.0")
    assert nodes["cray-mpich"].rstrip().endswith("%c=gcc@11.2.0")


# Spack's own Lmod layout of a lock's specs, asked of Spack itself (no install needed)
LAYOUT = """
import spack.environment as ev
import spack.modules.lmod as lmod
for spec in ev.active_environment().all_specs():
    if not spec.external:
        conf = lmod.LmodConfiguration(spec, "default", explicit=False)
        print(spec.name, lmod.LmodFileLayout(conf).filename)
"""


def test_cray_ex_modules_sit_at_the_level_of_their_prgenv(tmp_path):
    """Where Spack writes the cray-ex lock's modules: the CCE stack's at the compiler level
    cce/16.0.1 (which HPE's cce module and modulefiles/iostack put on MODULEPATH), the GNU
    stack's in Core (gcc 11.2.0 is the core compiler), and no MPI level (cray-mpich is an
    external with no module of Spack's to open one). tests/integration/test_lmod_cray_pe.py
    loads a tree laid out so, under Lmod with stand-ins of HPE's PE modules."""
    env_dir = runner.deployed_env(SpackEnv("cray-ex"), tmp_path)
    script = tmp_path / "layout.py"
    script.write_text(LAYOUT)
    env = {**os.environ, **{k: str(v) for k, v in runner.environment(targets.settings(), tmp_path).items()}}
    p = subprocess.run([str(pathlib.Path(env["SPACK_ROOT"]) / "bin" / "spack"), "-e", str(env_dir),
                        "python", str(script)], capture_output=True, text=True, timeout=1200, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    root = f"{tmp_path}/modulefiles/"
    levels = {}
    for line in p.stdout.splitlines():
        name, path = line.split()
        assert path.startswith(root), path
        levels.setdefault(path[len(root):].rsplit("/", 2)[0], set()).add(name)
    assert set(levels) == {"Core", "cce/16.0.1"}, sorted(levels)
    assert {"openifs", "nwp-env", "fdb", "eccodes"} <= levels["cce/16.0.1"]
    assert {"fdb", "eccodes", "fio", "ior", "io500"} <= levels["Core"]
