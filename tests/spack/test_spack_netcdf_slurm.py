"""The NetCDF output check ([INMCM-NetCDF]) on the release's netcdf-output-bench (its
module, never a copy built by the check), through the nightly's entry point on
`local-slurm`: a throwaway single-node Slurm cluster, srun with PMIx, 2 ranks, four modes at
two durabilities, both libraries. A timed check: each job's host-slot stamps show it ran with
nothing else beside it."""
import os
import re
import subprocess
import sys

import pytest
from conftest import IOSTACK

from iostack_testbed import slurm
from iostack.regression import results
from iostack_rfm.parsers import netcdf, slots


@pytest.fixture(scope="module")
def netcdf_nightly(local_deploy, tmp_path_factory):
    reason = slurm.unavailable_reason()
    if reason:
        pytest.skip(reason)
    root, _ = local_deploy
    # the test bed's throwaway Slurm around the run (tools/testbed); a short state directory:
    # its munge socket's path must fit in sun_path
    state = tmp_path_factory.mktemp("ls") / "slurm"
    p = subprocess.run([sys.executable, "-m", "iostack_testbed", "run", "slurm",
                        "--state-dir", str(state), "--",
                        IOSTACK, "nightly", "--site", "local", "--system", "local-slurm",
                        "--root", str(root), "--",
                        "-n", "NetcdfOutputCheck", "--skip-performance-check"],
                       capture_output=True, text=True, timeout=1800,
                       env={k: v for k, v in os.environ.items() if k != "SLURM_CONF"})
    print(p.stdout[-6000:], p.stderr[-3000:])
    report = re.search(r"^iostack: ReFrame report: (\S+)$", p.stdout, re.M)
    assert report, "ReFrame wrote no report"
    return p, results.read_report(__import__("pathlib").Path(report.group(1)))


def job_file(tc, name):
    for d in (tc["stagedir"], tc["outputdir"]):
        if d and os.path.isfile(os.path.join(d, name)):
            return open(os.path.join(d, name)).read()
    raise AssertionError(f"no {name} for {tc['name']}")


def test_netcdf_passes_through_slurm_one_library_after_the_other(netcdf_nightly):
    p, report = netcdf_nightly
    cases = results.last_attempts(report)
    # no build: the release's program
    assert sorted(results.check_of(tc) for tc in cases.values()) == ["NetcdfOutputCheck"] * 2
    assert {n: tc["result"] for n, tc in cases.items()} == {n: "pass" for n in cases}
    assert all(tc["system"] == "local-slurm" and tc["environ"] == "stack"
               for tc in cases.values())
    assert p.returncode == 0
    stderrs = {tc["name"]: job_file(tc, "rfm_job.err") for tc in cases.values()}
    for name, err in stderrs.items():
        assert "host-slot: exclusive from" in err, name
    assert slots.company(stderrs, list(stderrs)) == []


def test_netcdf_bench_wrote_the_workload_in_every_mode_and_durability(netcdf_nightly, capsys):
    _, report = netcdf_nightly
    cases = {tc["name"]: tc for tc in results.last_attempts(report).values()
             if results.check_of(tc) == "NetcdfOutputCheck"}
    assert sorted(cases) == ["NetcdfOutputCheck %library=netcdf %size=small",
                             "NetcdfOutputCheck %library=pnetcdf %size=small"]
    # performance is not judged here (--skip-performance-check: this node is no reference),
    # so the figures are not in the report; what each run wrote is, exactly
    for tc in cases.values():
        script = job_file(tc, "rfm_job.sh")
        # the gated speedup is the median of 3 interleaved serial/batching pairs
        for run in ("serial", "batching", "serial-r2", "batching-r2", "serial-r3",
                    "batching-r3"):
            assert f"> {run}.out" in script
            # the bytes are the sanity's, exact, in every run (79,488,000 per INMCM6P day)
            assert f" bytes={netcdf.expected_bytes('inmcm6p', 1)} " in job_file(tc, f"{run}.out")
        assert "#SBATCH --partition=iostack" in script and "#SBATCH --exclusive" in script
        assert "srun --mpi=pmix" in script and "--sync step" in script and "--sync none" in script
        assert "module load netcdf-output-bench" in script
