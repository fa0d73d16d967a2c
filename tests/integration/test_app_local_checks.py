"""An application check that runs on this node's own packages, for real, through the
nightly's entry point (`bin/iostack nightly`): OpenFOAM's pitzDaily (serial and 2 ranks,
each twice) on `local` (mpirun), a timed check: its job's host-slot stamps show it ran with
nothing else beside it. The NetCDF output benchmark is the release's, so its check runs in
the Spack tier (tests/spack/test_spack_netcdf_slurm.py), on `local-slurm`."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from iostack_testbed import slurm
from iostack.core import paths
from iostack.regression import references, results
from iostack_rfm.jobs import openfoam
from iostack_rfm.parsers import slots
from support import node_references

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("simpleFoam", "blockMesh", "decomposePar", "mpirun",
                                      "cmake", "pkg-config")),
    reason="needs OpenFOAM (Debian openfoam), Open MPI and CMake")


def run_nightly(system, check, tmp_path_factory):
    # short: the throwaway cluster's munge socket lives under it
    root = tmp_path_factory.mktemp(system.replace("local-", "ls"))
    # local's baseline, with a band no working program leaves: CI's node is no reference
    env = node_references.widened(tmp_path_factory.mktemp("references"), partitions=(
        f"{system}:default",))
    command = [str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local", "--system",
               system, "--root", str(root), "--", "-n", check]
    if system == "local-slurm":
        reason = slurm.unavailable_reason()
        if reason:
            pytest.skip(reason)
        # a throwaway Slurm for the run (tools/testbed)
        command = [sys.executable, "-m", "iostack_testbed", "run", "slurm", "--state-dir",
                   str(root / "slurm"), "--", *command]
    p = subprocess.run(command, capture_output=True, text=True, timeout=900,
                       env={**os.environ, **env})
    print(p.stdout[-6000:], p.stderr[-3000:])
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return system, p, results.read_report(reports[-1])


@pytest.fixture(scope="module")
def pitzdaily(tmp_path_factory):
    if not pathlib.Path("/usr/share/doc/openfoam-examples/examples").is_dir():
        pytest.skip("OpenFOAM's tutorials not installed (apt-get install openfoam-examples)")
    return run_nightly("local", "OpenFOAMPitzDailyCheck", tmp_path_factory)


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


def test_pitzdaily_converged_identically_and_reports_its_times(pitzdaily, capsys):
    _, _, report = pitzdaily
    (tc,) = [tc for tc in results.last_attempts(report).values()
             if results.check_of(tc) == "OpenFOAMPitzDailyCheck"]
    values = results.perf_values(tc)
    assert set(values) == {"clock_time_serial", "clock_time_2rank", "wall_serial", "wall_2rank",
                           "wall_serial_spread", "wall_2rank_spread", "time_ratio_2rank_serial"}
    # the gated values had a recorded baseline to meet: the committed one's value
    section = references.load(references.REFERENCES_DIR / "openfoam_pitzdaily.yaml")[
        "OpenFOAMPitzDailyCheck"]
    (node,) = {references.node_of(k) for k in section["references"]}   # the dev VM's
    committed = references.entries(section, "local:default", "*", "builtin", node)
    for var in ("wall_serial", "wall_2rank", "time_ratio_2rank_serial"):
        assert values[var][1] == pytest.approx(committed[var]["value"]), var
    # the iteration counts are the sanity's (each rerun converged where its run did, well
    # before the tutorial's 2000 iterations), no reference's
    out = job_file(tc, "rfm_job.out")
    for run in ("serial", "parallel"):
        times = {openfoam.summary_value(out, label, "times", int) for label in (run, f"{run}-rerun")}
        assert len(times) == 1 and 0 < times.pop() < 2000
    assert values["wall_2rank"][0] / values["wall_serial"][0] == pytest.approx(
        values["time_ratio_2rank_serial"][0])
    assert "mpirun -np 2 simpleFoam -parallel" in job_file(tc, "rfm_job.sh")
    with capsys.disabled():
        print(f"\n  pitzDaily @local: serial {values['wall_serial'][0]:.2f} s, 2 ranks "
              f"{values['wall_2rank'][0]:.2f} s, 2-rank/serial "
              f"{values['time_ratio_2rank_serial'][0]:.2f}", end="")


