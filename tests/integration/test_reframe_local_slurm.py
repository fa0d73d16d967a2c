"""The nightly on `local-slurm`: the same checks through a single-node Slurm cluster that
the tests start on this node (munged, slurmctld, slurmd) and stop afterwards. Like the
`local` test, limited to FDB bit-identity, FDB throughput and the stack smoke check."""
import os
import shutil
import subprocess
import sys

import pytest

from iostack_testbed import slurm
from iostack.core import paths
from iostack.regression import references, results
from support import node_references

pytestmark = pytest.mark.skipif(not shutil.which("fdb-hammer"), reason="FDB tools not installed")


@pytest.fixture(scope="session")
def local_slurm(tmp_path_factory):
    """A running single-node cluster; skipped (with why) where one cannot run."""
    reason = slurm.unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = slurm.LocalSlurm(tmp_path_factory.mktemp("slurm"))
    cluster.start()  # raises with the daemons' log tails if the node never gets idle
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def nightly(local_slurm, tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy-local-slurm")
    # local-slurm records no baseline of its own (a throwaway cluster on this node): local's,
    # with a band no working FDB leaves
    env = node_references.widened(tmp_path_factory.mktemp("references"),
                                  partitions=("local-slurm:default",))
    p = subprocess.run(
        [str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local", "--system",
         "local-slurm", "--root", str(root), "--", "-S", "valid_prog_environs=builtin",
         "-n", "FdbBitIdentityCheck%grib_input=synthetic",
         "-n", "FdbThroughputCheck", "-S", "FdbThroughputCheck.repeats=1"],
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, **local_slurm.env(), **env})
    print(p.stdout[-6000:], p.stderr[-3000:])
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return p, results.read_report(reports[-1])


def test_the_cluster_is_up_with_one_idle_node(local_slurm):
    assert local_slurm.node_state() in ("idle", "mixed", "allocated")
    p = subprocess.run(["sinfo", "-h", "-o", "%P %D"], capture_output=True, text=True,
                       env={**os.environ, **local_slurm.env()})
    assert p.stdout.split() == [f"{slurm.PARTITION}*", "1"]


def test_every_check_passes_through_slurm(nightly):
    p, report = nightly
    cases = results.last_attempts(report)
    names = [results.check_of(tc) for tc in cases.values()]
    assert names.count("FdbBitIdentityCheck") == 3
    assert names.count("FdbThroughputCheck") == 4
    # Debian's FDB has no fdb-archive-bench: the key path runs in `stack` only
    skipped = {n[0] for n, tc in cases.items() if tc["result"] == "skip"}
    assert skipped == {"FdbThroughputCheck %size=small %durability=sync-flush %path=key "
                       "%buffer_mib=64"}
    failed = {n: tc["fail_reason"] for n, tc in cases.items() if tc["result"] not in ("pass", "skip")}
    assert failed == {}
    assert p.returncode == 0


def test_jobs_ran_as_slurm_jobs(nightly):
    _, report = nightly
    for tc in results.last_attempts(report).values():
        assert tc["system"] == "local-slurm" and tc["scheduler"] == "squeue"
        if tc["result"] == "skip":
            continue  # skipped before its job was submitted (the key path in `builtin`)
        # a Slurm job id (squeue does not always report the node of a job that ended fast)
        assert str(tc["jobid"]).isdigit(), tc["name"]


def test_throughput_values_through_srun_are_sane(nightly):
    _, report = nightly
    for tc in results.last_attempts(report).values():
        if results.check_of(tc) != "FdbThroughputCheck" or tc["result"] == "skip":
            continue
        values = results.perf_values(tc)
        ratio, ref = values["fdb_write_ratio"][:2]
        assert 0.01 < ratio < 20 and not references.is_no_baseline(ref)
        assert all(1 < values[v][0] < 1e6 for v in ("fdb_write_bw", "raw_write_bw"))
        script = open(os.path.join(tc["stagedir"] if os.path.isdir(tc["stagedir"])
                                   else tc["outputdir"], "rfm_job.sh")).read()
        assert "#SBATCH --partition=iostack" in script and "\nsrun " in script


def test_the_test_bed_runs_the_nightly_on_its_own_slurm(tmp_path):
    """`iostack-testbed run slurm -- bin/iostack nightly ...`, as the nightly workflow does on
    a machine without a Slurm: up for the run, gone afterwards, the run's exit status."""
    reason = slurm.unavailable_reason()
    if reason:
        pytest.skip(reason)
    state = tmp_path / "slurm"
    p = subprocess.run(
        [sys.executable, "-m", "iostack_testbed", "run", "slurm", "--state-dir", str(state), "--",
         str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local", "--system",
         "local-slurm", "--root", str(tmp_path), "--",
         "-S", "valid_prog_environs=builtin",
         "-n", "FdbBitIdentityCheck%grib_input=synthetic%scenario=archive"],
        capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "SLURM_CONF"})
    print(p.stdout[-4000:], p.stderr[-2000:])
    assert p.returncode == 0
    assert "the slurm test bed is stopped" in p.stdout
    assert (state / "etc" / "slurm.conf").is_file()
    # every daemon it started has exited
    for daemon in slurm.DAEMONS:
        pid = int((state / "run" / f"{daemon}.daemon-pid").read_text())
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().split()[2] == "Z", daemon
