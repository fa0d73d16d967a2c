"""The PE-shaped tree (tests/support/cray_pe.py) behaves as the PE does where the cray-ex model
relies on it: the drivers refuse to compile without a PrgEnv and a CPU target loaded; after
`module load cpe/23.09 PrgEnv-gnu craype-x86-rome`, as a user does, `cc` compiles and links an
MPI program through cray-mpich's module, and it runs; and the modules each compiler external
of spack-env/sites/cray-ex/packages.yaml names, loaded one by one by Spack's own
`load_module` (as Spack does before every build with that compiler), give drivers that work,
with that compiler's PrgEnv and cray-mpich. The full model, Spack building eckit on such a
tree and a user loading it, is tests/nightly/test_cray_pe_spack_build.py."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest
import yaml

from iostack.core import paths
from iostack.site import facts as site_facts
from iostack.spack import runner
from support import targets
from support import cray_pe

pytestmark = pytest.mark.skipif(
    not pathlib.Path("/usr/share/lmod/lmod/init/bash").exists() or not shutil.which("gcc")
    or not cray_pe.OPENMPI_LIB.exists(), reason="needs Lmod, gcc and Open MPI (apt)")

MPI_HELLO = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("mpi ranks %d\n", size);
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def pe(tmp_path_factory):
    where = tmp_path_factory.mktemp("pe")
    return cray_pe.write(where, "cray-ex", module_root=str(where))


def environment(pe, tmp_path, **extra):
    return cray_pe.clean_environment(MODULEPATH=str(pe.core), IOSTACK_FAKE_PE_LOG=str(tmp_path / "log"),
                                     OMPI_ALLOW_RUN_AS_ROOT="1",
                                     OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)


def test_the_drivers_refuse_without_a_prgenv_and_a_target(pe, tmp_path):
    (tmp_path / "hello.c").write_text(MPI_HELLO)
    env = environment(pe, tmp_path)
    bare = subprocess.run([pe.drivers / "cc", "hello.c"], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert bare.returncode == 1 and "no programming environment loaded" in bare.stderr
    no_target = cray_pe.bash(f"module load PrgEnv-gnu && cd {tmp_path} && cc hello.c", env)
    assert no_target.returncode == 1 and "no CPU target module loaded" in no_target.stderr


def test_a_user_compiles_and_runs_an_mpi_program_with_cc(pe, tmp_path):
    (tmp_path / "hello.c").write_text(MPI_HELLO)
    env = environment(pe, tmp_path)
    release = site_facts.load("cray-ex").programming_environment["release"]
    p = cray_pe.bash(f"module load cpe/{release} PrgEnv-gnu craype-x86-rome && cd {tmp_path} "
                     "&& cc -o hello hello.c && ./hello", env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "mpi ranks 1"
    (call,) = [line.split("\t") for line in (tmp_path / "log").read_text().splitlines()]
    assert call[:4] == ["cc", "GNU", "x86-rome", str(pe.mpich["gcc@11.2.0"])]


LOAD = """
import json, os, subprocess, sys
from spack.util.module_cmd import load_module
for module in json.loads(sys.argv[1]):
    load_module(module)
p = subprocess.run(["cc", "-o", "hello", "hello.c"], capture_output=True, text=True)
print(json.dumps({"rc": p.returncode, "err": p.stderr, "PE_ENV": os.environ.get("PE_ENV"),
                  "CRAY_MPICH_DIR": os.environ.get("CRAY_MPICH_DIR", "")}))
"""


@pytest.mark.parametrize("prgenv", ["PrgEnv-gnu", "PrgEnv-cray"])
def test_the_modules_a_compiler_external_names_give_spack_working_drivers(pe, tmp_path, prgenv):
    """spack-env/sites/cray-ex/packages.yaml: each compiler is cc/CC/ftn with the modules
    EPCC's Spack loads for it [EPCC-Spack]; Spack's load_module of exactly those, then of
    cray-mpich's, gives a driver that compiles and links MPI with that PrgEnv."""
    try:
        runner.locate(targets.settings())
    except runner.SpackMissing as e:
        pytest.skip(str(e))
    facts = site_facts.load("cray-ex")
    compiler = facts.programming_environment["prgenvs"][prgenv]["compiler"]
    packages = yaml.safe_load((paths.SPACK_ENV_SITES / "cray-ex" / "packages.yaml").read_text())
    name = compiler.split("@")[0]
    (external,) = [e for e in packages["packages"][name]["externals"]
                   if e["spec"].startswith(compiler)]
    (mpich,) = [e for e in packages["packages"]["cray-mpich"]["externals"]
                if f"%{compiler}" in e["spec"]]
    (tmp_path / "hello.c").write_text(MPI_HELLO)
    (tmp_path / "load.py").write_text(LOAD)
    env = {**environment(pe, tmp_path, MODULESHOME="/usr/share/lmod/lmod"),
           **{k: str(v) for k, v in runner.environment(targets.settings(), tmp_path).items()}}
    p = subprocess.run([str(runner.spack_bin(targets.settings())), "python", "load.py",
                        json.dumps(external["modules"] + mpich["modules"])],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0, got["err"]
    assert got["PE_ENV"] == {"cce": "CRAY", "gcc": "GNU"}[name]
    assert got["CRAY_MPICH_DIR"] == str(pe.mpich[compiler])
    run = subprocess.run(["./hello"], capture_output=True, text=True, cwd=tmp_path,
                         env=environment(pe, tmp_path))
    assert run.stdout.strip() == "mpi ranks 1", run.stderr
