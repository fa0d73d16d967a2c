"""The application checks on the real sites' configurations (`reframe --dry-run`, away from
the sites: IOSTACK_RFM_OFFSITE=1, see reframe-tests/iostack_rfm/config.py): every test case is
generated and its job script says what would run. Each site runs the applications its stack
has: OpenIFS on cray-ex (CCE), OpenFOAM's HPC_Motorbike on oci-bm-optimized3, IO500, IOR
and mdtest on both."""
import collections
import os
import pathlib
import re
import subprocess

import pytest

from iostack.core import paths
from iostack.site import facts as site_facts
from iostack.regression import reframe
from support import targets

CHECKS = ["OpenIFSOutputCheck", "OpenifsIdealisedCheck", "HpcMotorbike.*", "IO500Check",
          "IorLayoutCheck", "MdtestScalingCheck", "NetcdfOutputCheck"]
#: test cases per check (fixtures included) each site must generate
EXPECTED = {
    "cray-ex": {
        # 4 cases x 2 writer strides x 3 stripings x 2 hugepages, CCE environment only
        "OpenIFSOutputCheck": 48,
        # 3 idealised cases x 3 output modes
        "OpenifsIdealisedCheck": 9,
        # compute partition, GNU environment: 2 node counts x 2 stonewalls
        "IO500Check": 4,
        "IorLayoutCheck": 4, "MdtestScalingCheck": 3,
        "NetcdfOutputCheck": 2,
    },
    "oci-bm-optimized3": {
        # per NPS partition
        "IO500Check": 8, "IorLayoutCheck": 8, "MdtestScalingCheck": 6,
        "NetcdfOutputCheck": 4,
        # 4 rank counts on NPS1 and NPS2; 4 node counts x 2 ranks per node and 2 storages
        # on NPS2; one shared mesh
        "HpcMotorbikeIntraNodeCheck": 8, "HpcMotorbikeInterNodeCheck": 8,
        "HpcMotorbikeStorageCheck": 2, "HpcMotorbikeSmallMesh": 1,
    },
}


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """Each site's dry run of the app checks, done once: {system: (prefix, process)}."""
    done = {}

    def run(system):
        if system not in done:
            prefix = tmp_path_factory.mktemp(system)
            env = {**os.environ, **{k: str(v) for k, v in reframe.environment(targets.of(prefix)).items()},
                   "IOSTACK_RFM_OFFSITE": "1", "IOSTACK_RFM_STATE": str(prefix)}
            select = [a for check in CHECKS for a in ("-n", check)]
            p = subprocess.run([str(targets.settings().venv / "bin" / "reframe"), "-C",
                                str(paths.reframe_config(site_facts.site_of_system(system))),
                                "--system", system, "--prefix",
                                str(prefix), *select, "--dry-run"],
                               capture_output=True, text=True, env=env, timeout=600)
            print(p.stdout[-5000:], p.stderr[-2000:])
            done[system] = (prefix, p)
        return done[system]
    return run


@pytest.fixture(params=sorted(EXPECTED))
def dry_run(request, dry_runs):
    return (request.param, *dry_runs(request.param))


def scripts(prefix, check):
    found = {}
    for path in pathlib.Path(prefix, "stage").glob(f"*/*/*/{check}_*/rfm_job.sh"):
        # the same variant on two partitions has one name: key by partition too
        found[str(path.relative_to(prefix))] = path.read_text()
    return found


def test_each_site_generates_the_cases_of_its_stack(dry_run):
    system, _, p = dry_run
    assert p.returncode == 0
    ran = re.search(r"Ran (\d+)/(\d+) test case\(s\)", p.stdout)
    assert ran and ran.group(1) == ran.group(2)
    counts = collections.Counter(
        m.group(1) for m in re.finditer(r"\]\s*\(\s*\d+/\d+\) (\w+)", p.stdout))
    assert dict(counts) == EXPECTED[system]
    assert int(ran.group(1)) == sum(EXPECTED[system].values())


def test_openifs_jobs_run_grib_then_fdb_and_compare(dry_runs):
    prefix, _ = dry_runs("cray-ex")
    jobs = scripts(prefix, "OpenIFSOutputCheck")
    assert len(jobs) == 48
    for s in jobs.values():
        assert "#SBATCH --cpus-per-task=8" in s and "export OMP_NUM_THREADS=8" in s
        grib, fdb = s.index("LFDBOP=false"), s.index("LFDBOP=true")
        assert grib < s.index("name=model-grib") < fdb < s.index("name=model-fdb")
        assert s.index("name=model-fdb") < s.index("compare-fdb")
        # ARCHER2's placement rules on every model launch [ARCHER2-Scheduler]
        launches = re.findall(r"srun ((?:--\S+ )+)\"\$OIFS_EXEC\" -v ecmwf -e \$EXPID", s)
        assert len(launches) == 2
        assert all(set(o.split()) == {"--cpus-per-task=8", "--hint=nomultithread",
                                      "--distribution=block:block"} for o in launches)
        assert "FDB5_CONFIG_FILE=/work/x01/x01/iostack-rfm/" in s
    t159 = [s for s in jobs.values() if "EXPDIR=${IOSTACK_OIFS_EXPERIMENTS:-}/T159" in s]
    assert len(t159) == 12
    for s in t159:
        assert "#SBATCH --ntasks=16" in s and "--ntasks-per-node=16" in s
        # one writer per node (128 cores / 8 threads = 16 tasks a node) or every task
        assert re.search(r"NAMPAR1:NWRTOUT=(1|16) ", s)
    striped = [s for s in jobs.values() if "lfs setstripe -c 8 -S 16M" in s]
    assert len(striped) == 16
    assert all("no lfs here, stripe 8x16M not applied" in s for s in striped)


def test_openifs_idealised_jobs_pair_the_modes_and_compare(dry_runs):
    """Each output mode's runs, repeated and interleaved: the FDB case also runs without
    output and to GRIB files, turning the order each repeat, then compares FDB's fields with
    the last repeat's GRIB files; every run's norms are compared."""
    prefix, _ = dry_runs("cray-ex")
    jobs = scripts(prefix, "OpenifsIdealisedCheck")
    assert len(jobs) == 9
    for s in jobs.values():
        models = re.findall(r"name=model-(\w+)-(\d) ", s)
        launches = re.findall(r"srun ((?:--\S+ )+)\"\$OIFS_EXEC\" > ifs.out", s)
        assert len(launches) == len(models) and all(
            set(o.split()) == {"--cpus-per-task=1", "--hint=nomultithread",
                               "--distribution=block:block"} for o in launches)
        assert "export OMP_NUM_THREADS=1" in s and "export OMP_STACKSIZE=64M" in s
        fort4 = re.findall(r"openifs_idealised fort4 (\w+) (\w+) --nproc (\d+) --groups "
                           r"\$OIFS_HOME/ifs-test/share/ifs_test/namelist", s)
        assert [m for _, m, _ in fort4] == [m for m, _ in models]
        case = fort4[0][0]
        # T21 keeps to 2 ranks; TL159 takes the node's 128 cores
        assert {n for _, _, n in fort4} == {"2" if case == "hs_t21l19" else "128"}
        assert f"--ntasks={2 if case == 'hs_t21l19' else 128}" in s
        assert s.index("name=figures") > max(s.index(f"name=model-{m}-{r}") for m, r in models)
        assert "--norms-of" in s and "ifs-grep-norms.pl NODE.001_01 > NORMS" in s
        if "fdb" not in {m for m, _ in models}:
            assert {m for m, _ in models} in ({"none"}, {"grib"}) and len(models) == 3
            assert "compare-fdb" not in s
            continue
        assert models == [("none", "1"), ("grib", "1"), ("fdb", "1"), ("grib", "2"),
                          ("fdb", "2"), ("none", "2"), ("fdb", "3"), ("none", "3"),
                          ("grib", "3")]
        assert len(re.findall(r"FDB5_CONFIG_FILE=\S+/fdb-(\d)/config.yaml MULTIO_CONFIG_FILE=", s)) == 3
        assert re.search(r"FDB5_CONFIG_FILE=\S+/fdb-3/config.yaml python3 -m iostack_rfm.jobs."
                         r"openifs compare-fdb \S+/runs/grib-3 --fdb-root \S+/fdb-3/root", s)


def test_motorbike_storage_jobs_follow_oci_openfoam(dry_runs):
    prefix, _ = dry_runs("oci-bm-optimized3")
    jobs = scripts(prefix, "HpcMotorbikeStorageCheck")
    assert len(jobs) == 2
    nvme = next(s for s in jobs.values() if "nvme-stage" in s)
    shared = next(s for s in jobs.values() if "nvme-stage" not in s)
    for s in (nvme, shared):
        assert "#SBATCH --ntasks=288" in s and "#SBATCH --ntasks-per-node=36" in s
        assert "#SBATCH --partition=nps2" in s
        assert 'writeInterval -set "10"' in s
        # Oracle's placement; no --mpi: Oracle Japan's Slurm has MpiDefault=pmix [OCI-Tips-Slurm]
        assert "srun --cpu-bind=rank_ldom --distribution=block:cyclic simpleFoam -parallel" in s
        assert "--mpi=" not in s
    order = [nvme.index(f"name={step} ") for step in
             ("stage-in", "decompose", "fan-out", "potential", "solve", "collect", "stage-out")]
    assert order == sorted(order)
    assert "nvme-stage stage-in " in nvme and "/mnt/localdisk/stage/iostack-rfm/" in nvme
    assert "name=stage-in" not in shared
    intra = scripts(prefix, "HpcMotorbikeIntraNodeCheck")
    binds = collections.Counter(re.search(r"srun (--cpu-bind=\S+)", s).group(1)
                                for s in intra.values())
    assert binds == {"--cpu-bind=cores": 4, "--cpu-bind=rank_ldom": 4}


def test_io500_ini_follows_the_parameters(dry_run):
    system, prefix, _ = dry_run
    jobs = scripts(prefix, "IO500Check")
    assert jobs
    stonewalls = collections.Counter(re.search(r"stonewall-time = (\d+)", s).group(1)
                                     for s in jobs.values())
    assert set(stonewalls) == {"30", "300"}
    for s in jobs.values():
        data = re.search(r"datadir = (\S+)", s).group(1)
        # shared by the nodes: Lustre on cray-ex; not the node-local NVMe on OCI
        if system == "cray-ex":
            assert data.startswith("/work/x01/x01/iostack-rfm/")
        else:
            assert "/mnt/localdisk" not in data and data.endswith("/io500-data")
        # each repeat its own run and output (the gate takes their median)
        assert re.search(r"\{ srun .*io500 io500\.ini > io500-1\.out", s)
