"""The real sites' configurations generate every test case of the suite (`reframe
--dry-run`), here, away from the sites: IOSTACK_RFM_OFFSITE=1 switches their modules system
to `nomod` because neither the Cray PE nor the sites' module trees exist on this node (see
reframe-tests/config/<site>.py). Job scripts are written, so the Slurm options and the
launch binding can be checked."""
import os
import pathlib
import re
import subprocess

import pytest

from iostack.core import paths
from iostack.site import facts as site_facts
from iostack.regression import reframe
from support import targets


def dry_run(system, prefix):
    env = {**os.environ, **{k: str(v) for k, v in reframe.environment(targets.of(prefix)).items()},
           "IOSTACK_RFM_OFFSITE": "1", "IOSTACK_RFM_STATE": str(prefix)}
    config = paths.reframe_config(site_facts.site_of_system(system))
    p = subprocess.run([str(targets.settings().venv / "bin" / "reframe"), "-C", str(config),
                        "--system", system, "--prefix", str(prefix), "--dry-run"],
                       capture_output=True, text=True, env=env, timeout=600)
    print(p.stdout[-5000:], p.stderr[-2000:])
    return p


def job_scripts(prefix, partition, check):
    return [p.read_text() for p in
            pathlib.Path(prefix, "stage").glob(f"*/{partition}/*/{check}_*/rfm_job.sh")]


SYSTEMS = ("cray-ex", "oci-bm-optimized3")


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    runs = {}
    for system in SYSTEMS:
        prefix = tmp_path_factory.mktemp(system)
        runs[system] = (prefix, dry_run(system, prefix))
    return runs


@pytest.mark.parametrize("system", SYSTEMS)
def test_the_whole_suite_dry_runs(dry_runs, system):
    _, p = dry_runs[system]
    assert p.returncode == 0
    ran = re.search(r"Ran (\d+)/(\d+) test case\(s\)", p.stdout)
    assert ran and ran.group(1) == ran.group(2) and int(ran.group(1)) > 0
    for check in ("FdbBitIdentityCheck", "FdbThroughputCheck", "StackSmokeCheck"):
        assert re.search(rf"{check} .*@{system}:", p.stdout), check
    # cluster partitions get the large throughput workload, never the CI-sized one
    assert "%size=large" in p.stdout and "%size=small" not in p.stdout


def test_cray_ex_jobs_ask_for_the_standard_partition_and_qos(dry_runs):
    """[ARCHER2-Scheduler]: every srun on the compute nodes places one task per core, CCXs
    filled in turn; the jobs load the PE release, the PrgEnv and the stack first."""
    prefix, _ = dry_runs["cray-ex"]
    scripts = job_scripts(prefix, "compute", "FdbThroughputCheck")
    assert scripts
    for s in scripts:
        assert "#SBATCH --partition=standard" in s and "#SBATCH --qos=standard" in s
        assert "\nsrun --hint=nomultithread --distribution=block:block " in s
        assert "/work/x01/x01/iostack-rfm/" in s
        assert "export LD_LIBRARY_PATH=$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH" in s
        # every job names the budget it charges [ARCHER2-Scheduler]
        assert "#SBATCH --account=x01" in s
        # a performance check asks for 2.25 GHz for all its sruns [ARCHER2-Energy], and
        # records the frequency it got
        assert "export SLURM_CPU_FREQ_REQ=2250000" in s
        assert "> iostack-cpufreq.txt" in s


def test_cray_ex_checks_that_time_nothing_keep_the_sites_frequency(dry_runs):
    prefix, _ = dry_runs["cray-ex"]
    scripts = job_scripts(prefix, "compute", "FdbBitIdentityCheck")
    assert scripts
    for s in scripts:
        assert "SLURM_CPU_FREQ_REQ=" not in s and "> iostack-cpufreq.txt" in s


def test_cray_ex_serial_jobs_ask_for_their_memory(dry_runs):
    """[ARCHER2-Analysis]: on the shared data-analysis nodes a job gives --ntasks and --mem."""
    prefix, _ = dry_runs["cray-ex"]
    scripts = job_scripts(prefix, "serial", "FdbBitIdentityCheck")
    assert scripts
    for s in scripts:
        assert "#SBATCH --partition=serial" in s and "#SBATCH --qos=serial" in s
        assert "#SBATCH --mem=16G" in s and re.search(r"#SBATCH --ntasks=\d+", s)


def test_oci_jobs_bind_per_nps_mode(dry_runs):
    prefix, _ = dry_runs["oci-bm-optimized3"]
    for nps, bind in (("nps1", "--cpu-bind=cores"), ("nps2", "--cpu-bind=rank_ldom")):
        scripts = job_scripts(prefix, nps, "FdbThroughputCheck")
        assert scripts, nps
        for s in scripts:
            assert f"#SBATCH --partition={nps}" in s     # Oracle Japan's partitions [OCI-Tips-SlurmOps]
            assert re.search(rf"\nsrun {bind} --distribution=block:cyclic bash ", s), s
            assert "/mnt/localdisk/stage/iostack-rfm/" in s
            # UCX on the cluster-network NIC, as Oracle's stack runs MPI [OCI-HPC-Stack]
            assert "export UCX_NET_DEVICES=mlx5_2:1" in s and "export OMPI_MCA_pml=ucx" in s
