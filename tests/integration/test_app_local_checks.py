"""The application checks that run on this node, for real, through the nightly's entry point
(`bin/iostack nightly`), each on one of the two local systems (the nightly runs both on
both): OpenFOAM's pitzDaily (serial and 2 ranks, each twice) on `local` (mpirun), the
NetCDF output benchmark (built with CMake, 2 ranks, four modes at two durabilities, both
libraries) on `local-slurm` (a throwaway single-node Slurm cluster, srun with PMIx). Both
are timed checks: each job's host-slot stamps show it ran with nothing else beside it."""
import os
import pathlib
import shutil
import subprocess

import pytest

from iostack import slurm
from iostack.core import paths
from iostack.regression import references, results
from iostack_rfm import netcdf, slots

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("simpleFoam", "blockMesh", "decomposePar", "mpirun",
                                      "cmake", "pkg-config")),
    reason="needs OpenFOAM (Debian openfoam), Open MPI and CMake")


def run_nightly(system, check, tmp_path_factory):
    args = ["nightly", "--site", "local", "--system", system]
    if system == "local-slurm":
        reason = slurm.unavailable_reason()
        if reason:
            pytest.skip(reason)
        args.append("--local-slurm")
    # short: the throwaway cluster's munge socket lives under it
    root = tmp_path_factory.mktemp(system.replace("local-", "ls"))
    p = subprocess.run([str(paths.REPO / "bin" / "iostack"), *args, "--root", str(root), "--",
                        "-n", check], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ))
    print(p.stdout[-6000:], p.stderr[-3000:])
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return system, p, results.read_report(reports[-1])


@pytest.fixture(scope="module")
def pitzdaily(tmp_path_factory):
    if not pathlib.Path("/usr/share/doc/openfoam-examples/examples").is_dir():
        pytest.skip("OpenFOAM's tutorials not installed (apt-get install openfoam-examples)")
    return run_nightly("local", "OpenFOAMPitzDailyCheck", tmp_path_factory)


@pytest.fixture(scope="module")
def netcdf_nightly(tmp_path_factory):
    return run_nightly("local-slurm", "NetcdfOutputCheck", tmp_path_factory)


def job_file(tc, name):
    for d in (tc["stagedir"], tc["outputdir"]):
        if d and os.path.isfile(os.path.join(d, name)):
            return open(os.path.join(d, name)).read()
    raise AssertionError(f"no {name} for {tc['name']}")


def is_build(tc):
    return results.check_of(tc).endswith("Build")


def job_stderrs(report):
    """Every job's stderr, builds' too, by test case name."""
    return {name: job_file(tc, "rfm_build.err" if is_build(tc) else "rfm_job.err")
            for (name, *_), tc in results.last_attempts(report).items()}


def assert_all_pass_alone(nightly, expected):
    system, p, report = nightly
    cases = results.last_attempts(report)
    assert sorted(results.check_of(tc) for tc in cases.values()) == sorted(expected)
    assert {n: tc["result"] for n, tc in cases.items()} == {n: "pass" for n in cases}
    assert all(tc["system"] == system for tc in cases.values())
    assert p.returncode == 0
    stderrs = job_stderrs(report)
    timed = [tc["name"] for tc in cases.values() if not is_build(tc)]
    for name in timed:
        assert "host-slot: exclusive from" in stderrs[name], name
    assert slots.company(stderrs, timed) == []


def test_pitzdaily_passes_on_local_with_the_host_to_itself(pitzdaily):
    assert_all_pass_alone(pitzdaily, ["OpenFOAMPitzDailyCheck"])


def test_netcdf_passes_through_slurm_one_library_after_the_other(netcdf_nightly):
    assert_all_pass_alone(netcdf_nightly, ["NetcdfOutputBenchBuild", "NetcdfOutputCheck",
                                           "NetcdfOutputCheck"])


def test_pitzdaily_converged_identically_and_reports_its_times(pitzdaily, capsys):
    _, _, report = pitzdaily
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
    assert "mpirun -np 2 simpleFoam -parallel" in job_file(tc, "rfm_job.sh")
    with capsys.disabled():
        print(f"\n  pitzDaily @local: serial {values['wall_serial'][0]:.2f} s, 2 ranks "
              f"{values['wall_2rank'][0]:.2f} s, 2-rank/serial "
              f"{values['time_ratio_2rank_serial'][0]:.2f}", end="")


def test_netcdf_bench_wrote_the_workload_in_every_mode_and_durability(netcdf_nightly, capsys):
    _, _, report = netcdf_nightly
    cases = {tc["name"]: tc for tc in results.last_attempts(report).values()
             if results.check_of(tc) == "NetcdfOutputCheck"}
    assert sorted(cases) == ["NetcdfOutputCheck %library=netcdf %size=small",
                             "NetcdfOutputCheck %library=pnetcdf %size=small"]
    for name, tc in cases.items():
        values = {k: v[0] for k, v in results.perf_values(tc).items()}
        assert values["bytes_written"] == netcdf.expected_bytes("inmcm6p", 1)
        for mode in netcdf.MODES:
            assert values[f"seconds_{mode}"] > 0
            # each phase is its slowest rank's; the total the slowest rank's sum
            phases = [values[f"{phase}_seconds_{mode}"] for phase in ("create", "write", "close")]
            assert max(phases) <= values[f"seconds_{mode}"] <= sum(phases) * (1 + 1e-6)
        assert values["speedup_batching_serial_sync_step"] == pytest.approx(
            values["seconds_serial"] / values["seconds_batching"])
        assert values["speedup_batching_serial_sync_none"] > 0
        independent = {"seconds_combined_independent", "seconds_batching_independent",
                       "collective_over_independent_combined"}
        if "%library=netcdf " in name:
            assert independent <= set(values)
        else:
            assert not independent & set(values)
        script = job_file(tc, "rfm_job.sh")
        assert "#SBATCH --partition=iostack" in script and "#SBATCH --exclusive" in script
        assert "srun --mpi=pmix" in script and "--sync step" in script and "--sync none" in script
        with capsys.disabled():
            print(f"\n  {name} @local-slurm: batching/serial at --sync step "
                  f"{values['speedup_batching_serial_sync_step']:.2f}, at none "
                  f"{values['speedup_batching_serial_sync_none']:.2f}", end="")
