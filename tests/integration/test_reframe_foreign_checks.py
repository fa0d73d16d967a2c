"""Checks iostack did not write, on iostack's ReFrame configuration, as a site would run them:
ReFrame's own tutorial checks (shipped with reframe-hpc), a plain MPI hello world on `local`
and on `local-slurm` (a throwaway single-node Slurm), and the EESSI test-suite from PyPI,
which lists its checks for the stack's modules and generates their jobs (dry run). ReFrame also starts without LMOD_CMD and
says how to get modules."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from iostack_testbed import slurm
from iostack.core import paths
from support import targets

LMOD_CMD = "/usr/share/lmod/lmod/libexec/lmod"
TUTORIAL = pathlib.Path(targets.settings().venv) / "share" / "doc" / "reframe-hpc" / "examples" / "tutorial"
MPI_HELLO = pathlib.Path(__file__).parent / "foreign_checks" / "mpi_hello.py"
# the `stack` environment's modules, as bin/iostack deploy installs them, and one module of
# an application the EESSI test-suite tests (its name as EESSI's modules spell it)
STACK_MODULES = ("openmpi", "fdb", "ior", "io500", "nvme-stage", "fdb-archive-bench",
                 "netcdf-output-bench")
EESSI_OSU = "OSU-Micro-Benchmarks/7.2-gompi-2023b"

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("mpicc", "mpirun")) or not os.path.exists(LMOD_CMD),
    reason="needs Open MPI and Lmod")


def reframe(tmp_path, *args, system="local", env=None):
    """reframe on iostack's configuration; (completed process, JSON report or None)."""
    report = tmp_path / f"report-{system}.json"
    p = subprocess.run(
        [str(targets.settings().venv / "bin" / "reframe"), "-C", str(paths.reframe_config("local")),
         "--system", system, "--prefix", str(tmp_path / "rfm"), "--report-file", str(report),
         *map(str, args)],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "LMOD_CMD": LMOD_CMD, "IOSTACK_RFM_STATE": str(tmp_path / "state"),
             **(env or {})})
    print(p.stdout[-5000:], p.stderr[-3000:])
    return p, json.loads(report.read_text()) if report.exists() else None


def results(report):
    return {(tc["name"], tc["environ"]): tc["result"] for run in report["runs"][-1:]
            for tc in run["testcases"]}


def test_reframe_tutorial_checks_pass(tmp_path):
    p, report = reframe(tmp_path, "-c", TUTORIAL / "dummy" / "params.py",
                        "-c", TUTORIAL / "stream" / "stream_build_run.py", "-p", "builtin", "-r")
    ran = results(report)
    # stream wants an environment with feature openmp and extras['omp_flag']
    assert ran[("stream_build_test", "builtin")] == "pass"
    assert sorted(n for n, _ in ran if n.startswith("echo_test")) == [
        "echo_test_v0 %x=0 %y=1", "echo_test_v0 %x=1 %y=0", "echo_test_v1 %xy=01",
        "echo_test_v1 %xy=10"]
    assert set(ran.values()) == {"pass"} and p.returncode == 0


def hello_ranks(report):
    (tc,) = [tc for run in report["runs"][-1:] for tc in run["testcases"]]
    out = pathlib.Path(tc["outputdir"]) / tc["job_stdout"]
    return tc, sorted(line for line in out.read_text().splitlines() if line.startswith("hello"))


def test_a_plain_mpi_check_starts_every_rank_on_local(tmp_path):
    p, report = reframe(tmp_path, "-c", MPI_HELLO, "-p", "builtin", "-r")
    tc, said = hello_ranks(report)
    assert said == ["hello from rank 0 of 2", "hello from rank 1 of 2"]
    assert tc["result"] == "pass" and p.returncode == 0


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory):
    reason = slurm.unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = slurm.LocalSlurm(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    yield cluster
    cluster.stop()


def test_a_plain_mpi_check_starts_every_rank_through_plain_srun(local_slurm, tmp_path):
    p, report = reframe(tmp_path, "-c", MPI_HELLO, "-p", "builtin", "-r",
                        system="local-slurm", env=local_slurm.env())
    tc, said = hello_ranks(report)
    assert said == ["hello from rank 0 of 2", "hello from rank 1 of 2"]
    script = (pathlib.Path(tc["outputdir"]) / "rfm_job.sh").read_text()
    assert "\nsrun ./MpiHelloWorld" in script and "--mpi" not in script
    assert tc["result"] == "pass" and p.returncode == 0


@pytest.fixture(scope="module")
def modulepath(tmp_path_factory):
    """A deployment's module tree: the `stack` environment's modules and an OSU module."""
    root = tmp_path_factory.mktemp("modulefiles")
    for module in (*(f"{m}/1.0" for m in STACK_MODULES), EESSI_OSU):
        f = root / f"{module}.lua"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text('setenv("IOSTACK_STANDIN", "1")\n')
    return root


def test_the_eessi_test_suite_lists_its_checks(modulepath, tmp_path):
    import eessi.testsuite  # requirements.txt: eessi-testsuite
    tests = pathlib.Path(eessi.testsuite.__file__).parent / "tests"
    p, _ = reframe(tmp_path, "-c", tests, "-R", "-l", env={"MODULEPATH": str(modulepath)})
    assert p.returncode == 0
    assert "skipping test file" not in p.stdout + p.stderr
    listed = [line for line in p.stdout.splitlines() if line.startswith("- EESSI_")]
    for environ in ("builtin", "stack"):
        osu = [line for line in listed if f"'local:default', '{environ}', '{EESSI_OSU}'" in line]
        assert any(line.startswith("- EESSI_OSU_pt2pt_CPU ") for line in osu), environ
        assert any(line.startswith("- EESSI_OSU_coll ") for line in osu), environ

    # its setup hooks take cores and memory from the partition; its job starts both ranks
    p, report = reframe(tmp_path, "-c", tests / "apps" / "osu.py", "-p", "builtin",
                        "-n", "EESSI_OSU_pt2pt_CPU.*osu_bw.*scale=2_cores", "--dry-run",
                        env={"MODULEPATH": str(modulepath)})
    (tc,) = [tc for run in report["runs"] for tc in run["testcases"]]
    assert tc["result"] == "pass" and p.returncode == 0
    script = (pathlib.Path(tc["stagedir"]) / "rfm_job.sh").read_text()
    assert "\nmpirun -np 2 osu_bw " in script


def test_reframe_starts_without_lmod_cmd_and_says_how_to_get_modules(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LMOD_CMD"}
    p = subprocess.run(
        [str(targets.settings().venv / "bin" / "reframe"), "-C", str(paths.reframe_config("local")), "--system",
         "local", "--prefix", str(tmp_path / "rfm"), "-c", TUTORIAL / "dummy" / "params.py",
         "-p", "builtin", "-r"], capture_output=True, text=True, timeout=600,
        env={**env, "IOSTACK_RFM_STATE": str(tmp_path / "state")})
    assert "could not find a sane Lmod" not in p.stdout + p.stderr
    assert ("LMOD_CMD is not set, so systems local and local-slurm load no modules"
            in p.stderr and "source /usr/share/lmod/lmod/init/bash" in p.stderr)
    assert "Ran 4/4 test case(s)" in p.stdout and p.returncode == 0
