"""The ReFrame configuration: every site is a system built from its facts (sites/<site>.yaml),
partitions carry the features the checks select on, every module an environment loads is in
the site's spack.lock, the nightly/weekly modes and the results DB are set up."""
import pathlib
import re

import pytest
import yaml
from iostack_testbed import slurm
from spack_lock import Lock

from iostack.core import paths
from support import rfm_config
from support import targets
from iostack.site import facts as site_facts


def load_config(monkeypatch, tmp_path, offsite=False, **env):
    """Every site's systems and environments, for a run writing under `tmp_path`."""
    return rfm_config.load_all(tmp_path, offsite, **env)


@pytest.fixture
def config(monkeypatch, tmp_path):
    return load_config(monkeypatch, tmp_path)


def systems(config):
    return {s["name"]: s for s in config["systems"]}


def environment(config, name, system):
    """The environment `name` a system gets (the Cray sites each have their PrgEnvs)."""
    return next(e for e in config["environments"]
                if e["name"] == name and system in e["target_systems"])


def partition(config, fullname):
    system, part = fullname.split(":")
    return next(p for p in systems(config)[system]["partitions"] if p["name"] == part)


def test_the_sites_and_local_slurm_are_systems(config):
    assert set(systems(config)) == {"local", "local-slurm", "local-cluster", "cray-ex",
                                    "setonix", "oci-bm-optimized3"}


def test_local_cluster_partitions_are_named_as_on_oci(config):
    """One partition per NPS, as oci-bm-optimized3 has them, and one of nodes booted with
    SMT on; Slurm partitions of the same names as OCI's (`iostack-testbed cluster up` makes
    them from the inventory)."""
    oci = [p["name"] for p in systems(config)["oci-bm-optimized3"]["partitions"]]
    assert [p["name"] for p in systems(config)["local-cluster"]["partitions"]] == oci + ["smt"]
    for nps in oci:
        p = partition(config, f"local-cluster:{nps}")
        oci_p = partition(config, f"oci-bm-optimized3:{nps}")
        assert (p["scheduler"], p["launcher"]) == ("squeue", "srun")
        assert p["access"] == [f"--partition={nps}"]
        assert oci_p["access"][0] == f"--partition={nps}"
        assert {"nvme", "slurm", "mpi", "small-io", nps} <= set(p["features"])
        assert p["extras"]["io_dir"] == oci_p["extras"]["io_dir"]
        assert p["extras"]["mpi_launcher_options"] == ["--mpi=pmix"]


def test_local_cluster_partitions_say_the_layout_the_binding_check_holds_them_to(config):
    """Each partition's NPS/SMT and the placement its sruns ask for, as ARCHER2's
    [ARCHER2-Scheduler]; the processor as the emulated node shows it."""
    layouts = {}
    for name in ("nps1", "nps2", "smt"):
        p = partition(config, f"local-cluster:{name}")
        assert "binding" in p["features"]
        assert p["extras"]["launcher_options"] == ["--hint=nomultithread",
                                                   "--distribution=block:block"]
        layouts[name] = (p["extras"]["nps"], p["extras"]["smt"], p["processor"]["num_cpus"])
        assert p["processor"]["num_sockets"] * p["processor"]["num_cpus_per_socket"] == \
            p["processor"]["num_cpus"]
    # one task per core: the SMT node's second threads are not the jobs' CPUs
    assert layouts["nps2"] == (2, False, layouts["nps1"][2])
    assert layouts["smt"] == (1, True, layouts["nps1"][2] // 2)
    assert layouts["nps1"][:2] == (1, False)
    # no MPI job of two ranks on the one-core SMT node
    assert "mpi" not in partition(config, "local-cluster:smt")["features"]


def test_facts_partitions_carry_their_layout_for_the_binding_check(config):
    for name in ("cray-ex:compute", "setonix:compute", "oci-bm-optimized3:nps2"):
        p = partition(config, name)
        assert "binding" in p["features"], name
        assert {"nps", "smt"} <= set(p["extras"]), name
    # nodes shared between jobs place nothing of their own
    assert "binding" not in partition(config, "cray-ex:serial")["features"]
    assert partition(config, "cray-ex:compute")["extras"]["nps"] == 4
    # an environment of each with OpenMP and hwloc builds the probe
    for env, system in (("PrgEnv-gnu", "cray-ex"), ("PrgEnv-gnu", "setonix"),
                        ("gnu", "oci-bm-optimized3")):
        assert {"openmp", "hwloc"} <= set(environment(config, env, system)["features"]), env
    assert environment(config, "PrgEnv-gnu", "cray-ex")["extras"]["app_modules"]["hwloc"] == \
        ["hwloc"]
    assert environment(config, "gnu", "oci-bm-optimized3")["env_vars"][0] == ["PKG_CONFIG_PATH",
                                          "/opt/hwloc/lib/pkgconfig:$PKG_CONFIG_PATH"]


def test_local_slurm_submits_where_the_test_beds_slurm_runs_jobs(config, tmp_path):
    """local-slurm's jobs go to a partition the test bed's slurm.conf defines, and, as that
    Slurm keeps no accounting, ReFrame polls it with squeue (its `slurm` scheduler asks
    sacct, which needs the accounting database)."""
    conf = slurm.slurm_conf(tmp_path, {"NodeName": "node1", "CPUs": "2"}, tmp_path / "munge",
                            6817, 6818)
    settings = dict(line.split("=", 1) for line in conf.splitlines()
                    if "=" in line and not line.startswith(("#", "NodeName", "PartitionName")))
    defined = re.findall(r"^PartitionName=(\S+)", conf, re.MULTILINE)
    p = partition(config, "local-slurm:default")
    asked = [a.split("=", 1)[1] for a in p["access"] if a.startswith("--partition=")]
    assert len(asked) == 1 and asked[0] in defined
    assert p["scheduler"] in ("slurm", "squeue")
    accounting = settings["AccountingStorageType"] != "accounting_storage/none"
    assert p["scheduler"] == "squeue" or accounting


def test_every_partition_can_run_the_fdb_checks(config):
    for system in config["systems"]:
        for p in system["partitions"]:
            assert {"fdb", "grib"} <= set(p["features"]), p["name"]
            envs = [environment(config, env, system["name"]) for env in p["environs"]]
            assert any("fdb" in env["features"] for env in envs)


def test_io_size_feature_splits_ci_nodes_from_clusters(config):
    assert "small-io" in partition(config, "local:default")["features"]
    assert "small-io" in partition(config, "local-slurm:default")["features"]
    for name in ("cray-ex:compute", "cray-ex:serial", "oci-bm-optimized3:nps1",
                 "oci-bm-optimized3:nps2"):
        assert "small-io" not in partition(config, name)["features"]


def test_cray_ex_compute_and_its_programming_environments(config):
    p = partition(config, "cray-ex:compute")
    assert p["scheduler"] == "slurm" and p["launcher"] == "srun"
    assert {"fdb", "grib", "lustre", "mpi", "nps4"} <= set(p["features"])
    assert p["access"] == ["--partition=standard", "--qos=standard", "--account=x01"]
    # [ARCHER2-Scheduler]: QoS short for quick runs; highmem's 512 GB nodes for big ones;
    # [ARCHER2-Hardware]: 256 GB per standard node
    assert p["extras"]["short_access"] == ["--qos=short"]
    assert p["extras"]["large_memory_access"] == ["--partition=highmem", "--qos=highmem"]
    assert p["extras"]["mem_per_node"] == 256 * 1024
    # every srun: one task per core, CCXs filled in turn [ARCHER2-Scheduler] [EPCC-ReFrame]
    assert p["extras"]["launcher_options"] == ["--hint=nomultithread", "--distribution=block:block"]
    assert "mpi_launcher_options" not in p["extras"]
    assert (p["processor"]["arch"], p["processor"]["num_cpus"]) == ("zen2", 128)
    assert p["extras"]["io_dir"] == "/work/x01/x01/iostack-rfm"
    # [ARCHER2-Energy]: performance checks ask for 2.25 GHz, not the 2.0 GHz default cap
    assert p["extras"]["cpu_freq_khz"] == 2250000
    assert set(p["environs"]) == {"PrgEnv-cray", "PrgEnv-gnu"}
    envs = {e["name"]: e for e in config["environments"] if "cray-ex" in e["target_systems"]}
    for name in ("PrgEnv-cray", "PrgEnv-gnu"):
        # the release first, then the PrgEnv, then the stack [ARCHER2-DevEnv]
        assert envs[name]["modules"][:3] == ["cpe/23.09", name, "iostack"]
        assert {"eccodes", "fdb"} <= set(envs[name]["modules"])
        assert (envs[name]["cc"], envs[name]["cxx"], envs[name]["ftn"]) == ("cc", "CC", "ftn")
        assert envs[name]["env_vars"] == [["LD_LIBRARY_PATH",
                                           "$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH"]]


def test_cray_ex_serial_is_shared_and_each_job_names_its_memory(config):
    """[ARCHER2-Analysis]: ReFrame gives --ntasks; the access gives --mem; the jobs ReFrame
    runs there at once stay within what QoS serial lets one user hold (32 cores, 125 GB)."""
    p = partition(config, "cray-ex:serial")
    assert p["access"] == ["--partition=serial", "--qos=serial", "--mem=16G", "--account=x01"]
    assert p["environs"] == ["PrgEnv-gnu"] and p["launcher"] == "local"
    # what one job may use of a shared node: what it asks
    assert p["extras"]["mem_per_node"] == 16 * 1024
    assert p["max_jobs"] * p["processor"]["num_cpus"] <= 32
    assert p["max_jobs"] * 16 <= 125


def test_every_job_of_a_site_that_requires_an_account_names_one(monkeypatch, tmp_path):
    """[ARCHER2-Scheduler]: every ARCHER2 job names its budget; the nightly's --account
    (IOSTACK_ACCOUNT) replaces the facts' one; a site that needs none names none."""
    config = load_config(monkeypatch, tmp_path)
    for name in ("cray-ex:compute", "cray-ex:serial"):
        assert "--account=x01" in partition(config, name)["access"]
    for p in systems(config)["oci-bm-optimized3"]["partitions"]:
        assert not [a for a in p["access"] if a.startswith("--account")]
    config = load_config(monkeypatch, tmp_path, IOSTACK_ACCOUNT="t01-test")
    assert [a for a in partition(config, "cray-ex:compute")["access"]
            if a.startswith("--account")] == ["--account=t01-test"]


def test_setonix_is_the_same_cray_system_with_its_own_facts(config):
    """Setonix, built by the same code as cray-ex from its facts alone: Pawsey's work
    partition, whole nodes asked for (they are shared by default), its project, CPE 25.03's
    PrgEnvs, /scratch; debug for short runs, highmem's 1 TB nodes for big ones."""
    (p,) = systems(config)["setonix"]["partitions"]
    assert p["name"] == "compute" and (p["scheduler"], p["launcher"]) == ("slurm", "srun")
    assert p["access"] == ["--partition=work", "--exclusive", "--account=pawsey0001"]
    assert {"fdb", "grib", "lustre", "mpi", "nps4"} <= set(p["features"])
    assert p["extras"]["io_dir"] == "/scratch/pawsey0001/iostack-rfm"
    assert p["extras"]["short_access"] == ["--partition=debug"]
    assert p["extras"]["large_memory_access"] == ["--partition=highmem"]
    assert p["extras"]["mem_per_node"] == 256 * 1024
    assert "cpu_freq_khz" not in p["extras"] and "launcher_options" not in p["extras"]
    assert (p["processor"]["arch"], p["processor"]["num_cpus"]) == ("zen3", 256)
    for name in ("PrgEnv-cray", "PrgEnv-gnu"):
        env = environment(config, name, "setonix")
        assert env["target_systems"] == ["setonix"]
        assert env["modules"][:3] == ["cpe/25.03", name, "iostack"]
        # the same stacks as cray-ex's: only the release differs
        cray = environment(config, name, "cray-ex")
        assert env["modules"][3:] == cray["modules"][3:]
        assert env["features"] == cray["features"]


def test_oci_binds_as_oci_openfoam_says(config):
    nps1 = partition(config, "oci-bm-optimized3:nps1")
    nps2 = partition(config, "oci-bm-optimized3:nps2")
    assert nps1["extras"]["launcher_options"] == ["--cpu-bind=cores", "--distribution=block:cyclic"]
    assert nps2["extras"]["launcher_options"] == ["--cpu-bind=rank_ldom",
                                                  "--distribution=block:cyclic"]
    # 512 GB per node (RealMemory=500000 MB) [OCI-Tips-Slurm]
    assert nps1["extras"]["mem_per_node"] == 512 * 1024
    assert {"nvme", "nps1"} <= set(nps1["features"]) and "nps2" in nps2["features"]
    for p in (nps1, nps2):
        assert p["processor"]["num_cpus"] == 36 and p["processor"]["num_sockets"] == 2
    # Oracle Japan's partitions, one per NPS mode [OCI-Tips-SlurmOps]
    assert nps1["access"] == ["--partition=nps1", "--exclusive"]
    assert nps2["access"] == ["--partition=nps2", "--exclusive"]


def test_oci_mpi_starts_through_pmix_over_the_cluster_network_nic(config):
    """Oracle Japan's Slurm sets MpiDefault=pmix, so srun starts Open MPI through PMIx as
    it is [OCI-Tips-Slurm]; MPI runs on mlx5_2 port 1 with RoCE's traffic class 105 and GID
    index 3 over UCX [OCI-HPC-Stack] [OCI-Tips-Slurm]."""
    for name in ("oci-bm-optimized3:nps1", "oci-bm-optimized3:nps2"):
        p = partition(config, name)
        assert "mpi_launcher_options" not in p["extras"]
        assert dict(p["env_vars"]) == {"UCX_NET_DEVICES": "mlx5_2:1", "OMPI_MCA_pml": "ucx",
                                       "UCX_IB_TRAFFIC_CLASS": "105", "UCX_IB_GID_INDEX": "3"}


def test_systems_take_hosts_processors_partitions_and_scratch_from_the_facts(config):
    """Every system a facts file lists is here; a partition on a node group of the facts has
    that group's processor, Slurm access and scratch."""
    by_name = systems(config)
    for site in site_facts.names():
        facts = site_facts.load(site)
        for name in facts.systems:
            system = by_name[name]
            if name == site:
                assert system["hostnames"] == facts.hostnames
            for p in system["partitions"]:
                groups = [g for g in facts.nodes.values()
                          if g.slurm and g.slurm_access()[0] in p.get("access", [])]
                if not groups:
                    continue
                (group,) = groups
                assert p["access"][:len(group.slurm_access())] == group.slurm_access()
                assert p.get("processor") == group.reframe_processor()
                assert p["extras"]["io_dir"] == group.scratch
                # the srun placement rules (the OCI binding of [OCI-OpenFOAM] is the
                # config's own), the PMI plugin and the RDMA NIC of the facts
                if group.srun_options():
                    assert p["extras"]["launcher_options"] == group.srun_options()
                assert p["extras"].get("mpi_launcher_options", []) == group.mpi_launcher_options()
                if group.rdma:
                    env = dict(p["env_vars"])
                    assert env["UCX_NET_DEVICES"] == f"{group.rdma['device']}:{group.rdma['port']}"
                    assert env["UCX_IB_TRAFFIC_CLASS"] == str(group.rdma["traffic_class"])
                    assert env["UCX_IB_GID_INDEX"] == str(group.rdma["gid_index"])
        # a vendor PE: every environment of the site is one of its PrgEnvs, with its release
        pe = facts.programming_environment
        if pe:
            envs = [e for e in config["environments"]
                    if set(e["target_systems"]) & set(facts.systems)]
            assert {e["name"] for e in envs} <= set(pe["prgenvs"])
            for e in envs:
                assert e["modules"][:2] == [f"cpe/{pe['release']}", e["name"]]


def _modules_of(env):
    return env.get("modules", []) + [m for modules in env.get("extras", {}).get(
        "app_modules", {}).values() for m in modules]


def module_problems(env, site):
    """Modules of an environment that the site's lock does not install (with the compiler of
    the environment's PrgEnv, or a core compiler, whose modules are always visible), that are
    not its programming environment's (sites/<site>.yaml) and not hand-written (modulefiles/)."""
    lock = Lock.of(site)
    external_modules = {m: s for s in lock.specs.values() if s.get("external")
                        for m in (s["external"].get("module") or [])}
    lmod = yaml.safe_load((paths.SPACK_ENV_SITES / site / "modules.yaml").read_text())
    core = set(lmod["modules"]["default"]["lmod"].get("core_compilers", []))
    pe = site_facts.load(site).programming_environment or {"prgenvs": {}}
    pe_modules = set(pe["prgenvs"]) | ({f"cpe/{pe['release']}"} if "release" in pe else set())
    meta_modules = {p.name for p in paths.META_MODULES.iterdir() if p.is_dir()}
    compilers = {pe["prgenvs"][m]["compiler"] for m in _modules_of(env) if m in pe["prgenvs"]}
    problems = []
    for module in _modules_of(env):
        if module in external_modules or module in pe_modules or module in meta_modules:
            continue
        in_lock = lock.named(module.split("/")[0])
        # Spack writes modules for the externals of a lock too (Debian's Open MPI on local)
        built = [s for s in in_lock if not s.get("external")]
        if not in_lock:
            problems.append(f"{env['name']}@{site}: module {module}: no such package in "
                            f"spack-env/sites/{site}/spack.lock")
        elif compilers and not any(lock.compilers(s) <= compilers | core for s in built):
            problems.append(f"{env['name']}@{site}: module {module}: the lock builds it with "
                            f"{[sorted(lock.compilers(s)) for s in built]}, not "
                            f"{sorted(compilers)} or a core compiler {sorted(core)}")
    return problems


def test_every_module_an_environment_loads_is_in_its_sites_lock(config):
    problems = [p for env in config["environments"] for system in env["target_systems"]
                for p in module_problems(env, site_facts.site_of_system(system))]
    assert problems == []


def test_a_module_the_lock_lacks_or_builds_with_another_compiler_is_named(config):
    envs = {e["name"]: e for e in config["environments"]
            if e["target_systems"] != ["setonix"]}
    gnu = dict(envs["gnu"], modules=envs["gnu"]["modules"] + ["openifs"])
    assert module_problems(gnu, "oci-bm-optimized3") == [
        "gnu@oci-bm-optimized3: module openifs: no such package in "
        "spack-env/sites/oci-bm-optimized3/spack.lock"]
    prgenv_gnu = dict(envs["PrgEnv-gnu"], extras={"app_modules": {"openifs": ["openifs"]}})
    assert module_problems(prgenv_gnu, "cray-ex") == [
        "PrgEnv-gnu@cray-ex: module openifs: the lock builds it with [['cce@16.0.1']], not "
        "['gcc@11.2.0'] or a core compiler ['gcc@11.2.0']"]


def test_every_mode_writes_its_junit_beside_the_run_reports_iostack_reads(monkeypatch, tmp_path):
    """Each mode's JUnit report lands in the directory of the run reports that bin/iostack
    reads and the nightly workflow uploads (<state>/reports, the state the runner gives)."""
    from iostack.regression import reframe, results

    target = targets.of(tmp_path / "deployment", LMOD_CMD="/bin/true")
    state = pathlib.Path(reframe.environment(target)["IOSTACK_RFM_STATE"])
    config = load_config(monkeypatch, state)
    assert [m["name"] for m in config["modes"]] == ["deploy", "nightly", "weekly"]
    for mode in config["modes"]:
        (junit,) = [o.split("=", 1)[1] for o in mode["options"] if o.startswith("--report-junit=")]
        beside = pathlib.Path(junit).with_name(f"run-report-{mode['name']}.json")
        beside.parent.mkdir(parents=True, exist_ok=True)
        beside.write_text("{}")
        assert beside in results.run_reports(state)


def test_reframe_stores_sessions_where_iostack_reads_them(monkeypatch, tmp_path):
    """The results DB of a deployment: ReFrame's configuration (its state directory, which
    the runner sets) and iostack's layout (what report and record-baseline read) agree."""
    from iostack.regression import reframe

    settings = targets.settings(LMOD_CMD="/bin/true").replace(results_db=None)
    target = targets.of(tmp_path / "deployment", settings_=settings)
    given = reframe.environment(target)
    state = given["IOSTACK_RFM_STATE"]
    config = load_config(monkeypatch, pathlib.Path(state))
    (storage,) = config["storage"]
    assert storage["enable"] is True
    # a run by hand on the root, and bin/iostack's (which names the DB), use the same one
    assert storage["sqlite_db_file"] == str(target.results_db) == str(given["RFM_SQLITE_DB_FILE"])
    assert config["general"][0]["report_file"].startswith(f"{state}/reports/")


def test_offsite_switches_only_the_real_sites_to_nomod(monkeypatch, tmp_path):
    lmod = {"LMOD_CMD": "/usr/share/lmod/lmod/libexec/lmod"}
    on_site = systems(load_config(monkeypatch, tmp_path, **lmod))
    off_site = systems(load_config(monkeypatch, tmp_path, offsite=True, **lmod))
    for name in ("cray-ex", "oci-bm-optimized3"):
        assert on_site[name]["modules_system"] == "lmod"
        assert off_site[name]["modules_system"] == "nomod"
    for name in ("local", "local-slurm", "local-cluster"):
        assert off_site[name]["modules_system"] == "lmod"


def test_every_partition_names_the_site_whose_facts_list_its_system(config):
    """The checks take their site from the partition (iostack_rfm.context.site_of), never by
    scanning facts files: each partition's `site` is the one that lists its system."""
    for system in config["systems"]:
        for p in system["partitions"]:
            site = p["extras"]["site"]
            assert system["name"] in site_facts.load(site).systems, (system["name"], site)
