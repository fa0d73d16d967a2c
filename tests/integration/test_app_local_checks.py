"""The application checks that run on this node, for real, through the nightly's entry point
(`bin/iostack nightly`): OpenFOAM's pitzDaily (serial and 2 ranks, each twice) and the
NetCDF output benchmark (built with CMake, 2 ranks, four modes, both libraries), on `local`
(mpirun) and on `local-slurm` (a throwaway single-node Slurm cluster, srun with PMIx)."""
import os
import pathlib
import shutil
import subprocess

import pytest

from iostack import paths, references, results, slurm
from iostack_rfm import netcdf

CHECKS = ["OpenFOAMPitzDailyCheck", "NetcdfOutputCheck"]

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("simpleFoam", "blockMesh", "decomposePar", "mpirun",
                                      "cmake", "pkg-config")),
    reason="needs OpenFOAM (Debian openfoam), Open MPI and CMake")


@pytest.fixture(scope="module", params=["local", "local-slurm"])
def nightly(request, tmp_path_factory):
    system = request.param
    args = ["nightly", "--site", "local", "--system", system]
    if system == "local-slurm":
        reason = slurm.unavailable_reason()
        if reason:
            pytest.skip(reason)
        args.append("--local-slurm")
    if not pathlib.Path("/usr/share/doc/openfoam-examples/examples").is_dir():
        pytest.skip("OpenFOAM's tutorials not installed (apt-get install openfoam-examples)")
    # short: the throwaway cluster's munge socket lives under it
    root = tmp_path_factory.mktemp(system.replace("local-", "ls"))
    select = [a for check in CHECKS for a in ("-n", check)]
    p = subprocess.run([str(paths.REPO / "bin" / "iostack"), *args, "--root", str(root), "--",
                        *select], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ))
    print(p.stdout[-6000:], p.stderr[-3000:])
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return system, p, results.read_report(reports[-1])


def job_script(tc):
    for d in (tc["stagedir"], tc["outputdir"]):
        if d and os.path.isfile(os.path.join(d, "rfm_job.sh")):
            return open(os.path.join(d, "rfm_job.sh")).read()
    raise AssertionError(f"no job script for {tc['name']}")


def test_every_case_passes(nightly):
    system, p, report = nightly
    cases = results.last_attempts(report)
    assert sorted(results.check_of(tc) for tc in cases.values()) == sorted(
        ["NetcdfOutputBenchBuild", "NetcdfOutputCheck", "NetcdfOutputCheck",
         "OpenFOAMPitzDailyCheck"])
    assert {n: tc["result"] for n, tc in cases.items()} == {n: "pass" for n in cases}
    assert all(tc["system"] == system for tc in cases.values())
    assert p.returncode == 0


def test_pitzdaily_converged_identically_and_reports_its_times(nightly, capsys):
    system, _, report = nightly
    (tc,) = [tc for tc in results.last_attempts(report).values()
             if results.check_of(tc) == "OpenFOAMPitzDailyCheck"]
    values = results.perf_values(tc)
    assert set(values) == {"clock_time_serial", "clock_time_2rank", "wall_serial", "wall_2rank",
                           "time_ratio_2rank_serial", "iterations_serial", "iterations_2rank"}
    # the gated values had a recorded baseline to meet
    for var in ("iterations_serial", "iterations_2rank", "time_ratio_2rank_serial"):
        assert not references.is_no_baseline(values[var][1]), var
    # converged well before the tutorial's 2000 iterations, as its baseline says
    assert 0 < values["iterations_serial"][0] == values["iterations_serial"][1] < 2000
    assert values["wall_2rank"][0] / values["wall_serial"][0] == pytest.approx(
        values["time_ratio_2rank_serial"][0])
    script = job_script(tc)
    if system == "local":
        assert "mpirun -np 2 simpleFoam -parallel" in script
    else:
        assert "#SBATCH --partition=iostack" in script
        assert "srun --mpi=pmix simpleFoam -parallel" in script
    with capsys.disabled():
        print(f"\n  pitzDaily @{system}: serial {values['wall_serial'][0]:.2f} s, 2 ranks "
              f"{values['wall_2rank'][0]:.2f} s, 2-rank/serial "
              f"{values['time_ratio_2rank_serial'][0]:.2f}", end="")


def test_netcdf_bench_wrote_the_workload_in_every_mode(nightly, capsys):
    system, _, report = nightly
    cases = {tc["name"]: tc for tc in results.last_attempts(report).values()
             if results.check_of(tc) == "NetcdfOutputCheck"}
    assert sorted(cases) == ["NetcdfOutputCheck %library=netcdf %size=small",
                             "NetcdfOutputCheck %library=pnetcdf %size=small"]
    for name, tc in cases.items():
        values = results.perf_values(tc)
        assert values["bytes_written"][0] == netcdf.expected_bytes("inmcm6p", 1)
        for mode in ("serial", "separate", "combined", "batching"):
            assert values[f"seconds_{mode}"][0] > 0
        assert values["speedup_batching_serial"][0] == pytest.approx(
            values["seconds_serial"][0] / values["seconds_batching"][0])
        with capsys.disabled():
            print(f"\n  {name} @{system}: batching/serial speedup "
                  f"{values['speedup_batching_serial'][0]:.2f}", end="")
